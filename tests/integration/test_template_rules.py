# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The rules a stub template keeps so that the sandbox means what it says
(docs/hardening.md, "Stub templates"): a sandboxed model names no module
of its own for a template to import; sandboxed and plain models never
share a template; a template imports nothing from a directory a stub can
write (the server's working directory, the user site-packages); and a
stub whose template died after the clone, before its reply,
is exec'd with descriptors of its own while the child the template left
never runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from test_sandbox_tightens import SITE
from test_stub_fork import PRELOAD_DIR, facts_of_each
from tritonclient.utils import InferenceServerException

from server import (
    TritonServer,
    build_repository,
    children,
    explicit,
    load_failure,
    running,
    wait_until,
)

REFUSED = (
    "parameter: stub_preload is refused for a sandboxed model (stub-sandbox): only the "
    "backend's stub-preload names modules that sandboxed stubs' template imports"
)


def parameters(values: dict[str, str]) -> str:
    return "".join(
        f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n' for k, v in values.items()
    )


def copy_of_probe(repo: Path, name: str, values: dict[str, str]) -> str:
    """fork_probe as model ``name`` of ``repo`` with the parameters
    ``values``; returns its config."""
    os.rename(build_repository(repo.parent / name, ["fork_probe"]) / "fork_probe", repo / name)
    path = repo / name / "config.pbtxt"
    config = path.read_text().replace('"fork_probe"', f'"{name}"') + parameters(values)
    path.write_text(config)
    return config


def test_a_sandboxed_model_cannot_name_modules_for_its_template(tmp_path: Path) -> None:
    repo = build_repository(tmp_path / "repo", ["bls_loader", "fork_probe"])
    copy_of_probe(repo, "own_preload", {"stub_preload": "json"})
    # stub-sandbox-model-control: a sandboxed model's loads reach the check.
    sandbox = ["stub-sandbox=true", "stub-sandbox-model-control=true"]
    args = [*explicit(["bls_loader"]), *(f"--backend-config=tritonpy,{k}" for k in sandbox)]
    srv = TritonServer(repo, tmp_path, args=args)
    with running(srv):
        # In its config.
        message = load_failure(srv, "own_preload")
        assert f"tritonpy: model 'own_preload' {REFUSED}" in message, message
        # In a config a sandboxed model gives pb_utils.load_model.
        config = json.dumps(
            {
                "name": "planted",
                "backend": "tritonpy",
                "max_batch_size": 0,
                "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [1]}],
                "output": [{"name": "INFO", "data_type": "TYPE_STRING", "dims": [1]}],
                "parameters": {"stub_preload": {"string_value": "json"}},
            }
        )
        model_py = (repo / "fork_probe" / "1" / "model.py").read_text()
        ins = []
        for key, value in (("OP", "load_files"), ("NAME", "planted"), ("CONFIG", config)):
            t = httpclient.InferInput(key, [1], "BYTES")
            t.set_data_from_numpy(np.array([value.encode()], object))
            ins.append(t)
        t = httpclient.InferInput("FILE", [1], "BYTES")
        t.set_data_from_numpy(np.array([model_py.encode()], object))
        ins.append(t)
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        try:
            with pytest.raises(InferenceServerException) as e:
                c.infer("bls_loader", ins)
        finally:
            c.close()
        assert f"tritonpy: model 'planted' {REFUSED}" in str(e.value), e.value
        assert not srv.model_ready("planted")
        # The operator's stub-preload still serves sandboxed stubs.
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        try:
            c.load_model("fork_probe")
        finally:
            c.close()
        for f in facts_of_each(srv).values():
            assert f["forked"], f


def plain_and_boxed_probes(tmp_path: Path) -> tuple[Path, Path]:
    """A repository of fork_probe and its sandboxed copy fork_probe_boxed,
    two instances each, whose modules say where they were imported (a
    file in the directory returned, open to all, when they can write it)."""
    repo = build_repository(tmp_path / "repo", ["fork_probe"])
    copy_of_probe(repo, "fork_probe_boxed", {"stub_sandbox": "true"})
    markers = tmp_path / "markers"
    markers.mkdir()
    markers.chmod(0o777)
    for name in ("fork_probe", "fork_probe_boxed"):
        (repo / name / "import_marker_dir").write_text(str(markers))
    return repo, markers


def template_started(srv: TritonServer, what: str) -> int:
    """The pid of the stub template the log says started for ``what``."""
    pattern = rf"stub template \([^)]*{re.escape(what)}[^)]*\) started, pid (\d+)"
    wait_until(lambda: re.search(pattern, srv.log()), timeout=60)
    found = re.findall(pattern, srv.log())
    assert len(found) == 1, found
    return int(found[0])


def test_sandboxed_and_plain_models_never_share_a_template(tmp_path: Path) -> None:
    repo, _ = plain_and_boxed_probes(tmp_path)
    with running(TritonServer(repo, tmp_path)) as srv:
        plain = facts_of_each(srv)
        boxed = facts_of_each(srv, "fork_probe_boxed")
        assert all(f["forked"] for f in [*plain.values(), *boxed.values()]), (plain, boxed)
        # The sandboxed model's shared one, and the plain model's own
        # (which forked its auto-complete stub too), each started once.
        # The plain model's own was forked from the plain shared one,
        # never from the sandboxed stubs'.
        shared = template_started(srv, "sandboxed stubs")
        own = template_started(srv, "model 'fork_probe' version 1 #")
        parents = re.findall(
            rf"\) started, pid {own}, forked from the stub template \(([^)]*)\)", srv.log()
        )
        assert len(parents) == 1 and "sandboxed" not in parents[0], srv.log()
        templates = set(children(srv.proc.pid, templates=True))
        assert len(templates) == 3 and {shared, own} < templates, (templates, shared, own)
        plain_shared = (templates - {shared, own}).pop()
        for pid, sandboxed in ((shared, "1"), (own, "0"), (plain_shared, "0")):
            assert f"--sandboxed\x00{sandboxed}" in Path(f"/proc/{pid}/cmdline").read_text()
        # Each plain stub is a fork of its model's own template, which
        # imported the module; each sandboxed one imported it itself, as
        # pid 1 of a namespace only the sandboxed stubs' template makes.
        assert all(f["imported"]["pid"] == own for f in plain.values()), (own, plain)
        assert all(f["pid"] == f["imported"]["pid"] == 1 for f in boxed.values()), boxed


def test_a_sandboxed_model_s_module_is_imported_in_its_sandbox_alone(tmp_path: Path) -> None:
    # Two instances each: a plain model gets a template of its own, which
    # imports its model.py on the host; a sandboxed one must not. The
    # module writes a file into a host directory open to all when it can.
    repo, markers = plain_and_boxed_probes(tmp_path)
    with running(TritonServer(repo, tmp_path)) as srv:
        plain = facts_of_each(srv)
        boxed = facts_of_each(srv, "fork_probe_boxed")
    made = sorted(os.listdir(markers))
    # The probe works: the plain model's import left its file.
    assert any(m.startswith("fork_probe-") for m in made), (made, plain)
    assert not any(m.startswith("fork_probe_boxed-") for m in made), made
    for f in boxed.values():
        # Imported by the stub itself (pid 1 of its namespace), where the
        # host's directory cannot be written.
        assert f["imported"]["pid"] == 1 and f["imported"]["error"], f["imported"]


def stubs_exec_d_for(srv: TritonServer, module: str) -> list[dict]:
    """Waits for the template to refuse to import ``module`` (not found
    where it looks); returns the facts of each stub, every one exec'd."""
    assert srv.wait_log(f"cannot fork stubs: importing '{module}' failed: ModuleNotFoundError"), (
        srv.log()[-3000:]
    )
    facts = list(facts_of_each(srv).values())
    for f in facts:
        assert not f["forked"], f
    return facts


def test_a_template_imports_nothing_from_the_server_s_directory(tmp_path: Path) -> None:
    # The server's working directory, where a stub could write (an exec'd
    # stub has it first on sys.path): the template must not import from it.
    (tmp_path / "planted_in_cwd.py").write_text("PLANTED = True\n")
    repo = build_repository(tmp_path / "repo", ["fork_probe"])
    srv = TritonServer(
        repo, tmp_path, args=["--backend-config=tritonpy,stub-preload=numpy,planted_in_cwd"]
    )
    with running(srv):
        for f in stubs_exec_d_for(srv, "planted_in_cwd"):
            # Nor does a stub's model (the stub drops that entry).
            assert str(tmp_path) not in f["path"], f["path"]


@pytest.mark.parametrize("sandbox", [False, True], ids=["plain", "sandboxed"])
def test_a_template_imports_nothing_from_the_user_site(tmp_path: Path, sandbox: bool) -> None:
    # The user site-packages of the server's user, which its plain stubs
    # can write; the interpreter outside this virtual environment (whose
    # site.py adds the user site), with the environment's packages through
    # PYTHONPATH.
    home = tmp_path / "home"
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    user_site = home / ".local" / "lib" / f"python{version}" / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "planted_in_user_site.py").write_text("PLANTED = True\n")
    python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    env = ["env", f"HOME={home}", f"PYTHONPATH={SITE}"]
    # The probe works: without -s, this interpreter imports it from there.
    found = subprocess.run(
        [*env, python, "-c", "import planted_in_user_site as m; print(m.__file__)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.stdout.strip() == str(user_site / "planted_in_user_site.py"), found
    repo = build_repository(tmp_path / "repo", ["fork_probe"])
    settings = [
        f"python-executable={python}",
        "stub-preload=numpy,planted_in_user_site",
        f"stub-sandbox={'true' if sandbox else 'false'}",
    ]
    srv = TritonServer(
        repo, tmp_path, args=[f"--backend-config=tritonpy,{s}" for s in settings], prefix=env
    )
    with running(srv):
        for f in stubs_exec_d_for(srv, "planted_in_user_site"):
            if not sandbox:
                # An exec'd stub of this server has the user site on its path.
                assert str(user_site) in f["path"], f["path"]


@pytest.mark.parametrize("sandbox", [False, True], ids=["plain", "sandboxed"])
def test_a_template_that_dies_before_its_reply_leaves_no_stub_behind(
    tmp_path: Path, sandbox: bool
) -> None:
    repo = build_repository(tmp_path / "repo", ["fork_probe"])
    extra = [f"stub-sandbox={'true' if sandbox else 'false'}"]
    srv = TritonServer(
        repo,
        tmp_path,
        args=[f"--backend-config=tritonpy,{e}" for e in ["stub-preload=dies_after_fork", *extra]],
        prefix=["env", f"PYTHONPATH={PRELOAD_DIR}"],
    )
    with running(srv):
        seen = facts_of_each(srv)
        died = "failed to fork a stub: it exited before it answered"
        assert srv.wait_log(died), srv.log()[-3000:]
        for f in seen.values():
            assert not f["forked"], f
        # Exactly the two stubs that answer run: what the dead templates
        # cloned never ran a stub (each read end of file for its go byte).
        stubs = children(srv.proc.pid)
        assert len(stubs) == 2, (stubs, seen)
        if not sandbox:
            assert sorted(stubs) == sorted(f["pid"] for f in seen.values()), (stubs, seen)
