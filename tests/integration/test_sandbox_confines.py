# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Under stub-sandbox=true a stub sees only what it needs (a root of its
own: the rest of the host is not there), reads only that and writes only
its own /tmp and /dev/shm (private tmpfs with a size cap) and the paths
the operator adds; it has no network but its own loopback unless the
operator says stub-sandbox-network=host, and a model may only tighten
either. Model code that tries each wall fails, and the stub serves on.
(docs/hardening.md, "Process lifetime and the sandbox".)"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
import uvloop
from test_python_based_backend import BACKEND, CONFIG
from test_sandbox_tightens import SANDBOX

import tritonpy
from tritonpy import install as inst

from checks import add_sub_works, infer_json, load_models, same_path
from environments import IN_MODEL_DIR, SITE, env_server, make_venv, pack, write_model
from server import TritonServer, build_repository, explicit, load_failure, running

MODELS = ["sandbox_probe", "add_sub"]
MIB = 1 << 20
TMP_BYTES = 8 * MIB


def probe(srv: TritonServer, mode: str, arg: str = "") -> dict:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        inputs = [httpclient.InferInput("MODE", [1], "BYTES")]
        inputs[0].set_data_from_numpy(np.array([mode.encode()], dtype=object))
        inputs.append(httpclient.InferInput("ARG", [1], "BYTES"))
        inputs[1].set_data_from_numpy(np.array([arg.encode()], dtype=object))
        return json.loads(c.infer("sandbox_probe", inputs).as_numpy("OUT")[0])
    finally:
        c.close()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("sandbox_confines")
    build_repository(work / "repo", MODELS)
    # A model directory the server has but did not load: another model's.
    build_repository(work / "repo", ["identity"])
    for d in ("granted_read", "granted_write", "home"):
        (work / d).mkdir()
    (work / "granted_read" / "data").write_text("operator's data\n")
    (work / "secret").write_text("not for models\n")
    return work


@pytest.fixture(scope="module")
def sandboxed(work: Path) -> Iterator[TritonServer]:
    args = [
        *explicit(MODELS),
        *SANDBOX,
        f"--backend-config=tritonpy,stub-sandbox-tmp-bytes={TMP_BYTES}",
        f"--backend-config=tritonpy,stub-sandbox-read-paths={work}/granted_read",
        f"--backend-config=tritonpy,stub-sandbox-write-paths={work}/granted_write",
    ]
    with running(TritonServer(work / "repo", work, args=args)) as srv:
        yield srv


def refused(out: dict) -> bool:
    """A Landlock refusal or a read-only mount."""
    return out.get("error", "").split(":")[0] in ("EACCES", "EPERM", "EROFS")


def absent(out: dict) -> bool:
    """Not in the stub's view at all."""
    return out.get("error", "").startswith("ENOENT")


WRITES = {
    "site-packages": str(SITE),
    "numpy": str(Path(np.__file__).parent),
    "stdlib": str(Path(os.__file__).parent),
    "tritonpy": str(Path(tritonpy.__file__).parent),
    "interpreter": str(Path(sys.executable).resolve().parent),
    "own_model": "{repo}/sandbox_probe",
    "own_version": "{repo}/sandbox_probe/1",
    "other_model": "{repo}/identity",
    "repository": "{repo}",
    "etc": "/etc",
    "root_home": os.path.expanduser("~root"),
    "a_home": "{work}/home",
    "var_tmp": "/var/tmp",
}


@pytest.mark.parametrize("where", list(WRITES))
def test_a_sandboxed_model_cannot_write_outside_its_scratch(
    sandboxed: TritonServer, work: Path, where: str
) -> None:
    target = WRITES[where].format(repo=work / "repo", work=work)
    out = probe(sandboxed, "write", target)
    assert refused(out) or absent(out), out
    assert not list(Path(target).glob("planted_*"))
    add_sub_works(sandboxed)


@pytest.mark.parametrize("where", ["/etc/shadow", "/usr/bin", "{repo}/sandbox_probe/config.pbtxt"])
def test_a_sandboxed_model_cannot_change_modes_outside_its_scratch(
    sandboxed: TritonServer, work: Path, where: str
) -> None:
    """Landlock has no right for chmod: the stub's view of the filesystem
    is read-only (its mount namespace), its scratch and the operator's
    paths excepted, and it cannot undo that."""
    target = where.format(repo=work / "repo")
    out = probe(sandboxed, "chmod", target)
    assert out.get("error", "").split(":")[0] in ("EROFS", "EPERM", "ENOENT"), out
    assert "ok" in probe(sandboxed, "chmod", str(work / "granted_write"))


def a_disk() -> str:
    """The device node of one of the machine's block devices."""
    for name in sorted(os.listdir("/sys/block")):
        if os.path.exists(f"/dev/{name}") and not name.startswith(("loop", "ram")):
            return f"/dev/{name}"
    return "/dev/no-disk"


@pytest.mark.parametrize(
    "path",
    [a_disk(), "/etc/shadow", "/etc/gshadow", "{repo}/identity/config.pbtxt", "{work}/secret"],
)
def test_a_sandboxed_model_cannot_read_secrets_or_other_models(
    sandboxed: TritonServer, work: Path, path: str
) -> None:
    target = path.format(repo=work / "repo", work=work)
    out = probe(sandboxed, "read", target)
    assert refused(out) or absent(out), out
    # The repository holds, in the stub's view, only the models it runs.
    listed = probe(sandboxed, "list", str(work / "repo"))
    assert refused(listed) or "identity" not in listed["ok"], listed


ENV_WARNING = (
    "runs sandboxed, but stub-env-allowlist is not set: sandboxed stubs get the server's "
    "whole environment, credentials in it included"
)


def test_an_operator_who_sets_no_allowlist_is_told_once(sandboxed: TritonServer) -> None:
    # Several sandboxed models are loaded; the warning comes with the first.
    assert len(MODELS) > 1
    assert sandboxed.log().count(ENV_WARNING) == 1, sandboxed.log()[-3000:]


@pytest.mark.parametrize(
    "path",
    ["/etc/shadow", "/home", "/dev/pts", "/dev/sda", "/run", "{work}/secret"],
)
def test_what_a_sandboxed_model_does_not_need_is_not_there(
    sandboxed: TritonServer, work: Path, path: str
) -> None:
    """Its root holds only what it reads: the rest of the host (a root
    server's stub could open much of it with CAP_DAC_OVERRIDE, whatever
    the modes) does not exist for it."""
    out = probe(sandboxed, "list", path.format(work=work))
    assert absent(out), out


def test_a_sandboxed_model_has_a_private_tmp(sandboxed: TritonServer, work: Path) -> None:
    """Code that writes /tmp/x by name works, and the host never sees it;
    the model's repository (under the host's /tmp here) is still there."""
    name = f"/tmp/tritonpy-private-{os.getpid()}"
    assert probe(sandboxed, "put", name).get("ok") == name
    assert probe(sandboxed, "cat", name)["ok"].startswith("written by")
    assert not os.path.lexists(name)
    config = probe(sandboxed, "read", str(work / "repo" / "sandbox_probe" / "config.pbtxt"))
    assert config.get("ok", 0) > 0, config
    # /dev/shm is private too, and capped as well.
    shm = probe(sandboxed, "fill", "/dev/shm")
    assert shm["error"].startswith("ENOSPC"), shm
    assert TMP_BYTES - 2 * MIB <= shm["written"] <= TMP_BYTES, shm
    add_sub_works(sandboxed)


def test_a_sandboxed_model_reads_what_it_needs(sandboxed: TritonServer, work: Path) -> None:
    for path in (
        work / "repo" / "sandbox_probe" / "config.pbtxt",
        Path("/etc/passwd"),
        Path("/proc/cpuinfo"),
        Path("/sys/devices/system/cpu/online"),
        Path(np.__file__),
        work / "granted_read" / "data",
    ):
        out = probe(sandboxed, "read", str(path))
        assert out.get("ok", 0) > 0, (path, out)
    # The usual devices are written.
    assert "ok" in probe(sandboxed, "device", "/dev/null"), probe(sandboxed, "device", "/dev/null")


def test_a_sandboxed_model_writes_its_scratch_up_to_the_cap(
    sandboxed: TritonServer, work: Path
) -> None:
    where = probe(sandboxed, "where")
    assert where["tmpdir"] == "/tmp", where
    # What it keeps of the capabilities of its user namespace's root:
    # reading (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH); nothing it executes
    # gets more.
    caps = where["capabilities"]
    assert caps["CapEff"] == caps["CapPrm"] == caps["CapBnd"] == 0b110, where
    assert caps["CapInh"] == caps["CapAmb"] == 0, where
    assert "ok" in probe(sandboxed, "write", where["tmpdir"])
    filled = probe(sandboxed, "fill", where["tmpdir"])
    assert filled["error"].startswith("ENOSPC"), filled
    assert TMP_BYTES - 2 * MIB <= filled["written"] <= TMP_BYTES, filled
    # The operator's writable path.
    assert "ok" in probe(sandboxed, "write", str(work / "granted_write"))
    add_sub_works(sandboxed)


def test_a_sandboxed_model_has_only_its_own_loopback(sandboxed: TritonServer) -> None:
    assert probe(sandboxed, "where")["interfaces"] == ["lo"]
    # Its own loopback is up.
    assert "ok" in probe(sandboxed, "loopback"), probe(sandboxed, "loopback")
    # The server's own ports are out of reach.
    for port in (sandboxed.http_port, sandboxed.grpc_port, sandboxed.metrics_port):
        out = probe(sandboxed, "connect", f"127.0.0.1:{port}")
        assert out.get("error", "").startswith("ECONNREFUSED"), out
    add_sub_works(sandboxed)


def test_a_sandboxed_model_cannot_reach_the_hosts_abstract_sockets(
    sandboxed: TritonServer,
) -> None:
    name = f"tritonpy-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as host:
        host.bind(f"\0{name}")
        host.listen(1)
        out = probe(sandboxed, "abstract", name)
    assert out.get("error", "").split(":")[0] in ("ECONNREFUSED", "EPERM"), out


def test_with_the_host_network_the_abstract_sockets_stay_out_of_reach(tmp_path: Path) -> None:
    """stub-sandbox-network=host: today's network (the server's ports
    answer), but Landlock still scopes abstract unix sockets to the
    sandbox."""
    repo = build_repository(tmp_path / "repo", MODELS)
    args = [*explicit(MODELS), *SANDBOX, "--backend-config=tritonpy,stub-sandbox-network=host"]
    with running(TritonServer(repo, tmp_path, args=args)) as srv:
        assert probe(srv, "where")["interfaces"] != ["lo"]
        assert "ok" in probe(srv, "connect", f"127.0.0.1:{srv.http_port}")
        name = f"tritonpy-test-host-{os.getpid()}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as host:
            host.bind(f"\0{name}")
            host.listen(1)
            out = probe(srv, "abstract", name)
        assert out.get("error", "").startswith("EPERM"), out
        add_sub_works(srv)


def test_a_sandboxed_model_runs_in_an_execution_environment(tmp_path: Path) -> None:
    """A directory environment (its own interpreter) and an archive one
    (unpacked into the cache, tritonpy lent): the sandboxed stub reads
    the environment, and nothing else it did not read before."""
    repo = tmp_path / "repo"
    repo.mkdir()
    # numpy and uvloop, wherever this installation has them (linked: the
    # sandbox must follow the links), and nothing else.
    deps = tmp_path / "deps"
    deps.mkdir()
    for module in (np, uvloop):
        where = Path(module.__file__).resolve().parents[1]
        for name in (module.__name__, f"{module.__name__}.libs"):
            if (where / name).exists():
                (deps / name).symlink_to(where / name)
    venv_dir = make_venv(tmp_path / "dir-env", SITE, copies=False)
    with open(next(venv_dir.glob("lib/python3*/site-packages/extra-site.pth")), "a") as f:
        f.write(f"{deps}\n")
    tar_src = make_venv(tmp_path / "tar-env", deps, copies=True)
    write_model(repo, "env_dir", str(venv_dir))
    write_model(repo, "env_tar", IN_MODEL_DIR, {"env.tar.gz": pack(tar_src, tmp_path / "e.tgz")})
    # The same directory environment, named by a model that has no say
    # over what its stubs read: where the operator did not open it, and
    # through a link in its own directory.
    write_model(repo, "env_elsewhere", str(tmp_path / "dir-env-elsewhere"))
    shutil.copytree(venv_dir, tmp_path / "dir-env-elsewhere", symlinks=True)
    write_model(repo, "env_link", "$$TRITON_MODEL_DIRECTORY/env")
    (repo / "env_link" / "env").symlink_to(tmp_path / "dir-env-elsewhere")
    cache = tmp_path / "cache"
    opened = f"--backend-config=tritonpy,stub-sandbox-read-paths={venv_dir}"
    with running(env_server(repo, tmp_path, cache, *SANDBOX, opened)) as srv:
        for name, prefix in (("env_dir", venv_dir), ("env_tar", None)):
            load_models(srv, name)
            info = infer_json(srv, name, "IN", np.array([1], np.int32), "INT32", "INFO")
            assert (
                same_path(info["prefix"], prefix)
                if prefix
                else same_path(Path(info["prefix"]).parent, cache)
            ), info
            assert same_path(info["numpy"], np.__file__), info
        for name in ("env_elsewhere", "env_link"):
            message = load_failure(srv, name)
            assert f"tritonpy: model '{name}': EXECUTION_ENV_PATH '" in message, message
            assert "it is not in what the model's sandboxed stubs may read" in message, message
            assert "must lie in its own directory or under stub-sandbox-read-paths" in message


def test_a_sandboxed_python_based_backend_reads_its_own_directory(tmp_path: Path) -> None:
    """backends/<name>/model.py is the model's code: the sandboxed stub
    reads it there (and its model's directory in the repository)."""
    backends = inst.backend_dir(tmp_path / "backends")
    shutil.copytree(BACKEND, backends / "shout")
    repo = tmp_path / "repo"
    (repo / "shout_a" / "1").mkdir(parents=True)
    text = CONFIG.format(name="shout_a", backend="shout", suffix="!")
    (repo / "shout_a" / "config.pbtxt").write_text(text)
    args = ["--backend-config=python,stub-sandbox=true"]
    with running(TritonServer(repo, tmp_path, backend_dir=backends, args=args)) as srv:
        out = infer_json(srv, "shout_a", "TEXT", np.array([b"quiet"], dtype=object), "BYTES", "OUT")
        assert out["text"] == "QUIET!" and out["tritonpy_stub"], out
