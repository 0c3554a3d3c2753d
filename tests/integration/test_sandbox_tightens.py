# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""With the backend's sandbox on (stub-sandbox=true), a model may tighten
it but never loosen it: its own config, or the config a sandboxed model
hands pb_utils.load_model, that switches the sandbox off or raises its
process or address-space limit is refused naming the key. A sandboxed stub
holds no descriptor that reaches the server (its lifeline is a pipe of its
own, not a pidfd of the server). Descriptors a stub passes that are not
memfds are closed off the reader's thread: a socket whose close would
block for an hour costs neither the reader, nor the restart, nor the
unload. The same sandbox for a server that is not root (uid 65534).
(docs/hardening.md, "Process lifetime and the sandbox".)"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hostile_proc import DEADLINE, ask, unload

import tritonpy

from checks import add_sub_works, from_a_new_stub
from server import TritonServer, build_repository, explicit, load_failure, running

MODELS = ["hostile_proc", "add_sub"]
GIB = 1 << 30
SANDBOX = [
    "--backend-config=tritonpy,stub-sandbox=true",
    "--backend-config=tritonpy,stub-sandbox-max-processes=64",
    f"--backend-config=tritonpy,stub-sandbox-address-space-bytes={64 * GIB}",
]


def with_parameters(repo: Path, model: str, **params: str) -> None:
    with open(repo / model / "config.pbtxt", "a") as f:
        for key, value in params.items():
            f.write(f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n')


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("sandbox_tightens")
    repo = build_repository(work / "repo", MODELS)
    # The model loading API on for sandboxed models (off by default), so
    # that a load that loosens the sandbox meets the sandbox's own check.
    control = "--backend-config=tritonpy,stub-sandbox-model-control=true"
    args = [*explicit(MODELS), *SANDBOX, control]
    with running(TritonServer(repo, work, args=args)) as srv:
        yield srv


LOOSER = {
    "off": ({"stub_sandbox": "false"}, "parameter stub_sandbox=false"),
    "processes": (
        {"stub_sandbox_max_processes": "100000"},
        "parameter stub_sandbox_max_processes=100000 is above the backend's "
        "stub-sandbox-max-processes=64",
    ),
    "address_space_unlimited": (
        {"stub_sandbox_address_space_bytes": "0"},
        "parameter stub_sandbox_address_space_bytes=0 (unlimited) is above the backend's "
        f"stub-sandbox-address-space-bytes={64 * GIB}",
    ),
    "address_space_larger": (
        {"stub_sandbox_address_space_bytes": str(128 * GIB)},
        f"parameter stub_sandbox_address_space_bytes={128 * GIB} is above",
    ),
    "network": (
        {"stub_sandbox_network": "host"},
        "parameter stub_sandbox_network=host is looser than the backend's "
        "stub-sandbox-network=none",
    ),
    "scratch": (
        {"stub_sandbox_tmp_bytes": str(GIB)},
        f"parameter stub_sandbox_tmp_bytes={GIB} is above the backend's "
        f"stub-sandbox-tmp-bytes={256 << 20}",
    ),
}


@pytest.mark.parametrize("kind", list(LOOSER))
def test_a_model_that_loosens_the_sandbox_is_refused_naming_the_key(
    sandboxed: TritonServer, kind: str
) -> None:
    params, needle = LOOSER[kind]
    repo = Path(sandboxed.repo)
    name = f"loose_{kind}"
    (repo / name / "1").mkdir(parents=True)
    source = repo / "hostile_proc"
    (repo / name / "1" / "model.py").write_bytes((source / "1" / "model.py").read_bytes())
    config = (source / "config.pbtxt").read_text().replace('"hostile_proc"', f'"{name}"')
    (repo / name / "config.pbtxt").write_text(config)
    with_parameters(repo, name, **params)
    message = load_failure(sandboxed, name)
    assert needle in message, message
    assert "would loosen the backend's sandbox, which a model may only tighten" in message
    add_sub_works(sandboxed)


def test_a_model_loaded_by_a_sandboxed_model_cannot_loosen_it(sandboxed: TritonServer) -> None:
    out = ask(sandboxed, "load_loose")
    assert isinstance(out, dict)
    assert "parameter stub_sandbox=false" in out["error"], out
    assert not sandboxed.model_ready("hostile_loose")
    add_sub_works(sandboxed)


def test_a_model_may_tighten_the_sandbox(tmp_path: Path) -> None:
    repo = build_repository(tmp_path / "repo", MODELS)
    with_parameters(
        repo,
        "hostile_proc",
        stub_sandbox="true",
        stub_sandbox_max_processes="32",
        stub_sandbox_address_space_bytes=str(32 * GIB),
    )
    with running(TritonServer(repo, tmp_path, args=[*explicit(MODELS), *SANDBOX])) as srv:
        facts = ask(srv, "facts")
        assert isinstance(facts, dict), facts
        assert facts["pid"] == 1 and facts["nproc"] == 32 and facts["as"] == 32 * GIB, facts
        add_sub_works(srv)


def test_a_sandboxed_stub_holds_nothing_that_reaches_the_server(
    sandboxed: TritonServer,
) -> None:
    out = ask(sandboxed, "descriptors")
    assert isinstance(out, dict)
    reaching = {fd: d for fd, d in out.items() if d["reaches"]}
    assert reaching == {}, out
    assert not any("pidfd" in d["is"] for d in out.values()), out
    # Its lifeline, a pipe; its socket to the backend; no stdin.
    assert out["4"]["is"].startswith("pipe:") and out["3"]["is"].startswith("socket:"), out
    assert out["0"]["is"] == "/dev/null", out
    facts = ask(sandboxed, "facts")
    assert isinstance(facts, dict) and facts["ppid"] == 0 and len(facts["visible_pids"]) < 5
    assert sandboxed.proc.poll() is None
    add_sub_works(sandboxed)


def test_a_passed_socket_whose_close_blocks_stalls_nothing(tmp_path: Path) -> None:
    """The stub passes, as an arena, a TCP socket with unsent data to a
    peer that never reads and SO_LINGER of an hour, keeping no copy: its
    close would block an hour. The stub is killed for the violation, a new
    one answers, and the model unloads, all promptly."""
    listener = socket.socket()
    # A small window, so that the stub's data stays unsent.
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # never accepted, never read
    port = listener.getsockname()[1]
    repo = build_repository(tmp_path / "repo", MODELS)
    try:
        with running(TritonServer(repo, tmp_path, args=explicit(MODELS))) as srv:
            errors: list[str] = []

            def send() -> None:
                try:
                    errors.append(json.dumps(ask(srv, "linger", arg=port)))
                except Exception as e:
                    errors.append(str(e))

            before = ask(srv, "facts")
            assert isinstance(before, dict)
            sender = threading.Thread(target=send, daemon=True)
            sender.start()
            assert srv.wait_log("is not a memfd on tmpfs", DEADLINE), srv.log()[-3000:]
            sender.join(DEADLINE)
            assert not sender.is_alive(), "the request that passed the socket never ended"
            assert errors and "protocol violation" in errors[0], errors
            # A new stub answers: the reader went on.
            from_a_new_stub(lambda: ask(srv, "facts"), lambda f: f["pid"], before["pid"], DEADLINE)
            unload(srv, "hostile_proc")
            add_sub_works(srv)
    finally:
        listener.close()


# A server that is not root: the sandbox maps the server's own ids (uid 0
# inside is the server's), denies setgroups and takes no other real uid.
NOBODY = 65534
SITE = Path(tritonpy.__file__).resolve().parents[1]


def python_for_nobody() -> str | None:
    """An interpreter of this minor version that uid NOBODY can run, seeing
    this installation's site-packages (tritonpy, numpy) through
    PYTHONPATH; None where there is none (an interpreter under /root)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    for candidate in (
        sys.executable,
        f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}",
    ):
        check = [
            *as_nobody(),
            f"PYTHONPATH={SITE}",
            candidate,
            "-c",
            "import numpy, tritonpy.stub._lifetime",
        ]
        if subprocess.run(check, capture_output=True, timeout=120).returncode == 0:
            return candidate
    return None


def as_nobody() -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env"]


def test_the_sandbox_of_a_server_that_is_not_root() -> None:
    from test_sandbox_confines import probe  # which imports this module

    python = python_for_nobody()
    if python is None:
        pytest.skip("no interpreter that uid 65534 can run with this installation")
    work = Path(tempfile.mkdtemp(prefix="tritonpy-nobody-"))
    try:
        work.chmod(0o777)
        repo = build_repository(work / "repo", [*MODELS, "env_info", "sandbox_probe"])
        env = hostile_probe_env(work)
        with open(repo / "env_info" / "config.pbtxt", "a") as f:
            f.write(
                f'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{env}" }} }}\n'
            )
        for path in [work, *work.rglob("*")]:
            path.chmod(0o777)
        args = [
            *explicit([*MODELS, "sandbox_probe"]),
            *SANDBOX,
            f"--backend-config=tritonpy,python-executable={python}",
            f"--backend-config=tritonpy,env-cache-dir={work}/cache",
            # Where a sandboxed model's environment may lie.
            f"--backend-config=tritonpy,stub-sandbox-read-paths={env}",
        ]
        # asyncio's loop: the system interpreter may lack uvloop.
        prefix = [*as_nobody(), f"HOME={work}", f"PYTHONPATH={SITE}", "TRITONPY_LOOP=asyncio"]
        with running(TritonServer(repo, work, args=args, prefix=prefix)) as srv:
            assert os.stat(f"/proc/{srv.proc.pid}").st_uid == NOBODY
            facts = ask(srv, "facts")
            assert isinstance(facts, dict), facts
            # uid 0 of its namespace is the server's own uid outside.
            assert facts["pid"] == 1 and facts["ppid"] == 0 and facts["uid"] == 0, facts
            assert facts["visible_pids"][0] == 1 and len(facts["visible_pids"]) < 5, facts
            assert facts["no_new_privs"] == "1" and facts["nproc"] == 64, facts
            out = ask(srv, "descriptors")
            assert isinstance(out, dict)
            assert {fd: d for fd, d in out.items() if d["reaches"]} == {}, out
            killed = ask(srv, "kill_server", arg=srv.proc.pid)
            assert killed == {f"server pid {srv.proc.pid}": "[Errno 3] No such process"}, killed
            # Files and network: its model directory, writable by all,
            # is not by the stub; nor is the server's port in reach.
            wrote = probe(srv, "write", str(repo / "sandbox_probe"))
            assert wrote.get("error", "").split(":")[0] in ("EACCES", "EROFS"), wrote
            port = probe(srv, "connect", f"127.0.0.1:{srv.http_port}")
            assert port.get("error", "").startswith("ECONNREFUSED"), port
            assert "ok" in probe(srv, "write", probe(srv, "where")["tmpdir"])
            # The probe of an environment's interpreter: sandboxed too.
            assert "gave an unexpected answer" in load_failure(srv, "env_info")
            assert int((work / "facts" / "pid").read_text()) < 10
            add_sub_works(srv)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def hostile_probe_env(work: Path) -> Path:
    """An environment whose interpreter writes down its pid, then answers
    nothing."""
    (work / "facts").mkdir()
    python = work / "env" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\necho $$ > {work}/facts/pid\n")
    return work / "env"
