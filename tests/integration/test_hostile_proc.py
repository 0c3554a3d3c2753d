# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What model code starts dies with its stub (restart, unload, a server
killed with SIGKILL, even while the model holds the GIL), and under the
opt-in sandbox (stub-sandbox) a model can neither fork-bomb the machine nor
kill the server, while the server and another model serve on.
(docs/hardening.md, "Process lifetime and the sandbox".)"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from checks import add_sub_works, load_models
from server import TritonServer, alive, build_repository, explicit, load_failure, running, wait_gone

MODELS = ["hostile_proc", "add_sub"]
DEADLINE = 60.0  # generous: a busy 2-core machine


def ask(
    srv: TritonServer, mode: str, arg: int | None = None, model: str = "hostile_proc"
) -> object:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        inputs = [httpclient.InferInput("MODE", [1], "BYTES")]
        inputs[0].set_data_from_numpy(np.array([mode.encode()], dtype=object))
        if arg is not None:
            inputs.append(httpclient.InferInput("ARG", [1], "INT64"))
            inputs[1].set_data_from_numpy(np.array([arg], dtype=np.int64))
        return json.loads(c.infer(model, inputs).as_numpy("OUT")[0])
    finally:
        c.close()


def ask_and_ignore(srv: TritonServer, mode: str) -> None:
    with contextlib.suppress(Exception):
        ask(srv, mode)


def assert_gone(pids: list[int], what: str) -> None:
    left = wait_gone(pids, DEADLINE)
    assert not left, f"{what}: {left} still run"


def group(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                out.append(int(entry))
    return out


def stub_of(srv: TritonServer, model: str) -> int:
    """The host pid of ``model``'s stub."""
    for pid in srv.stubs():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"--instance" in args and args[args.index(b"--instance") + 1].startswith(model.encode()):
            return pid
    raise AssertionError(f"no stub of {model} among {srv.stubs()}")


def unload(srv: TritonServer, model: str) -> None:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        c.unload_model(model)
        deadline = time.monotonic() + DEADLINE
        while model in {
            m["name"] for m in c.get_model_repository_index() if m.get("state") == "READY"
        }:
            assert time.monotonic() < deadline, f"{model} still loaded"
            time.sleep(0.05)
    finally:
        c.close()


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("hostile_proc")
    with running(
        TritonServer(build_repository(work / "repo", MODELS), work, args=explicit(MODELS))
    ) as srv:
        yield srv


def test_what_a_model_starts_dies_when_its_stub_dies(plain: TritonServer) -> None:
    started = ask(plain, "spawn")
    assert isinstance(started, dict) and alive(started["child"])
    with pytest.raises(Exception, match="exited with status 3"):
        ask(plain, "exit")
    assert_gone([started["stub"], started["child"]], "after the stub exited")
    # The instance came back, and the other model never stopped.
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            again = ask(plain, "spawn")
            break
        except Exception:
            assert time.monotonic() < deadline, "no new stub"
            time.sleep(0.1)
    assert isinstance(again, dict) and again["stub"] != started["stub"]
    add_sub_works(plain)


def test_what_a_model_starts_dies_when_it_unloads(plain: TritonServer) -> None:
    started = ask(plain, "spawn")
    assert isinstance(started, dict) and alive(started["child"])
    unload(plain, "hostile_proc")
    assert_gone([started["stub"], started["child"]], "after the unload")
    add_sub_works(plain)
    load_models(plain, "hostile_proc")
    assert plain.model_ready("hostile_proc")


def test_stubs_and_what_they_started_die_with_a_killed_server(tmp_path: Path) -> None:
    """The model holds the GIL (a regular expression that never ends) when
    the server is SIGKILLed: the stub's watch of the server does not need
    it."""
    srv = TritonServer(build_repository(tmp_path / "repo", MODELS), tmp_path, args=explicit(MODELS))
    try:
        srv.wait_ready()
        stubs = srv.stubs()
        started = ask(srv, "spawn")
        assert isinstance(started, dict)
        # A request that never returns, from a thread of its own (the HTTP
        # client's async_infer only sends when its event loop gets a turn).
        threading.Thread(target=ask_and_ignore, args=(srv, "hold_gil"), daemon=True).start()
        assert srv.wait_log("hostile_proc: holding the GIL", DEADLINE)
        held = int(srv.log().split("holding the GIL, sleeper ")[1].split()[0])
        assert alive(held) and alive(started["child"])
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait()
        assert_gone([*stubs, started["child"], held], "after the server was killed")
    finally:
        srv.stop()


# The sandbox: every model of this server, add_sub included.
SANDBOX = [
    "--backend-config=tritonpy,stub-sandbox=true",
    "--backend-config=tritonpy,stub-sandbox-max-processes=64",
]


@pytest.fixture
def sandboxed(tmp_path: Path) -> Iterator[TritonServer]:
    repo = build_repository(tmp_path / "repo", MODELS)
    with running(TritonServer(repo, tmp_path, args=[*explicit(MODELS), *SANDBOX])) as srv:
        yield srv


def test_a_sandboxed_stub_is_alone_in_its_namespaces(sandboxed: TritonServer) -> None:
    facts = ask(sandboxed, "facts")
    assert isinstance(facts, dict)
    assert facts["pid"] == 1 and facts["ppid"] == 0, facts
    assert facts["no_new_privs"] == "1" and facts["nproc"] == 64, facts
    # Its own /proc: itself (pid 1) and what it started, never the server.
    assert facts["visible_pids"][0] == 1 and len(facts["visible_pids"]) < 5, facts
    if os.geteuid() == 0:
        # A root server's stub has another real uid, and cannot undo that.
        assert facts["uid"] == 1, facts
        assert facts["back_to_root"] == "[Errno 1] Operation not permitted", facts
    add_sub_works(sandboxed)


def test_a_fork_bomb_stops_at_the_sandbox_limit(sandboxed: TritonServer) -> None:
    stub = stub_of(sandboxed, "hostile_proc")
    out = ask(sandboxed, "forkbomb")
    assert isinstance(out, dict)
    assert "Resource temporarily unavailable" in out["error"], out
    assert 0 < len(group(stub)) <= 64
    add_sub_works(sandboxed)
    assert sandboxed.model_ready("hostile_proc")
    bomb = group(stub)
    unload(sandboxed, "hostile_proc")
    assert_gone([stub, *bomb], "the stub and the bomb after the unload")
    add_sub_works(sandboxed)


def test_a_sandboxed_model_cannot_kill_the_server(sandboxed: TritonServer) -> None:
    out = ask(sandboxed, "kill_server", arg=sandboxed.proc.pid)
    assert isinstance(out, dict)
    # Not even found: the server is outside the stub's pid namespace.
    assert out == {f"server pid {sandboxed.proc.pid}": "[Errno 3] No such process"}, out
    assert sandboxed.proc.poll() is None
    add_sub_works(sandboxed)
    assert ask(sandboxed, "facts")


def test_a_sandboxed_stub_takes_its_namespace_along_when_the_server_is_killed(
    tmp_path: Path,
) -> None:
    """Even what left the stub's process group (a new session) dies: the
    stub is pid 1 of its pid namespace."""
    repo = build_repository(tmp_path / "repo", MODELS)
    srv = TritonServer(repo, tmp_path, args=[*explicit(MODELS), *SANDBOX])
    try:
        srv.wait_ready()
        stub = stub_of(srv, "hostile_proc")
        ask(srv, "spawn")
        ask(srv, "escape")
        inside = namespace_of(stub)
        assert len(inside) >= 3, inside  # the stub, the sleeper, the escapee
        assert len(group(stub)) < len(inside), "nothing left the group"
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait()
        assert_gone([*srv.stubs(), *inside], "the sandbox after the server was killed")
    finally:
        srv.stop()


def test_what_leaves_a_sandboxed_stub_s_group_dies_when_the_model_unloads(
    sandboxed: TritonServer,
) -> None:
    """A process in a session of its own (setsid) is out of reach of the
    kill of the stub's process group; under the sandbox it is still in the
    stub's pid namespace, which ends with its pid 1, the stub. The model
    ends nothing itself (it has no finalize)."""
    stub = stub_of(sandboxed, "hostile_proc")
    ask(sandboxed, "escape")
    inside = namespace_of(stub)
    escaped = [p for p in inside if session_of(p) != session_of(stub)]
    # It left: the group kill alone would not reach it.
    assert escaped and not set(escaped) & set(group(stub)), (inside, group(stub))
    unload(sandboxed, "hostile_proc")
    assert_gone([stub, *inside], "the sandbox after the unload")
    add_sub_works(sandboxed)


def session_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[3])


def namespace_of(stub: int) -> list[int]:
    """Live processes in the pid namespace of ``stub`` (host pids)."""
    target = os.readlink(f"/proc/{stub}/ns/pid")
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == target and alive(int(entry)):
                    out.append(int(entry))
            except OSError:
                continue
    return out


MIB = 1 << 20


def test_an_allocation_past_the_sandbox_s_address_space_is_a_memory_error(
    sandboxed: TritonServer,
) -> None:
    """stub_sandbox_address_space_bytes (RLIMIT_AS) bounds the stub and what
    it starts: model code that reserves more gets MemoryError, which fails
    that request alone, and the same stub serves on. The limit is the
    address space the same model uses sandboxed without one, plus 512 MiB;
    the reservation (np.empty: no page touched) is 1 GiB, which that
    model, without the limit, makes."""
    unlimited = ask(sandboxed, "facts")
    assert isinstance(unlimited, dict) and unlimited["as"] == -1, unlimited  # RLIM_INFINITY
    assert ask(sandboxed, "allocate", arg=1024 * MIB) == {"allocated": 1024 * MIB}
    limit = (unlimited["vm"] + 512 * MIB) // 4096 * 4096
    tight = "hostile_proc_tight"
    source, copy = Path(sandboxed.repo) / "hostile_proc", Path(sandboxed.repo) / tight
    (copy / "1").mkdir(parents=True)
    (copy / "1" / "model.py").write_bytes((source / "1" / "model.py").read_bytes())
    config = (source / "config.pbtxt").read_text().replace('"hostile_proc"', f'"{tight}"')
    config += (
        'parameters { key: "stub_sandbox_address_space_bytes" '
        f'value {{ string_value: "{limit}" }} }}\n'
    )
    (copy / "config.pbtxt").write_text(config)
    load_models(sandboxed, tight)
    facts = ask(sandboxed, "facts", model=tight)
    assert isinstance(facts, dict) and facts["pid"] == 1 and facts["as"] == limit, facts
    assert ask(sandboxed, "child_limits", model=tight) == {"child_as": str(limit)}
    stub = stub_of(sandboxed, tight)
    with pytest.raises(InferenceServerException) as e:
        ask(sandboxed, "allocate", arg=1024 * MIB, model=tight)
    message = str(e.value)
    assert "MemoryError" in message and f"tritonpy: model '{tight}'" in message, message
    # The same stub serves on, and within its limit it allocates.
    assert ask(sandboxed, "allocate", arg=64 * MIB, model=tight) == {"allocated": 64 * MIB}
    assert stub_of(sandboxed, tight) == stub
    add_sub_works(sandboxed)


def test_a_model_parameter_sandboxes_one_model(tmp_path: Path) -> None:
    repo = build_repository(tmp_path / "repo", MODELS)
    with open(repo / "hostile_proc" / "config.pbtxt", "a") as f:
        f.write('parameters { key: "stub_sandbox" value { string_value: "true" } }\n')
        f.write('parameters { key: "stub_sandbox_max_processes" value { string_value: "100" } }\n')
    with running(TritonServer(repo, tmp_path, args=explicit(MODELS))) as srv:
        facts = ask(srv, "facts")
        assert isinstance(facts, dict) and facts["pid"] == 1 and facts["nproc"] == 100, facts
        add_sub_works(srv)
        assert stub_of(srv, "add_sub")  # add_sub's stub is a plain child of the server


# Kernels that refuse a step of the sandbox: the command that runs the
# server as on such a kernel, the step the load error names, and the error.
REFUSING_KERNELS = {
    # A /proc with something mounted over part of it (as in most
    # containers) may not be mounted again in a user namespace.
    "proc": (
        [
            *("unshare", "--mount", "--propagation", "private", "sh", "-c"),
            'mount -t tmpfs none /proc/sys && exec "$0" "$@"',
        ],
        "mounting a /proc of the stub's own pid namespace (mount -t proc)",
        "Operation not permitted",
    ),
    # No Landlock (a seccomp filter answers as an older kernel would).
    "landlock": (
        [sys.executable, str(Path(__file__).parent / "no_landlock.py")],
        "a Landlock ruleset, which confines the stub's files (landlock_create_ruleset)",
        "Function not implemented",
    ),
}


@pytest.mark.parametrize("kernel", list(REFUSING_KERNELS))
def test_a_sandbox_the_kernel_refuses_fails_the_load_saying_what(
    tmp_path: Path, kernel: str
) -> None:
    """The load fails naming the step, and the server serves on."""
    prefix, step, error = REFUSING_KERNELS[kernel]
    repo = build_repository(tmp_path / "repo", MODELS)
    srv = TritonServer(
        repo,
        tmp_path,
        args=["--model-control-mode=explicit", "--load-model=add_sub"],
        prefix=prefix,
    )
    with running(srv):
        with open(repo / "hostile_proc" / "config.pbtxt", "a") as f:
            f.write('parameters { key: "stub_sandbox" value { string_value: "true" } }\n')
        message = load_failure(srv, "hostile_proc")
        assert (
            "the stub sandbox (stub-sandbox=true) could not be set up: the kernel refused "
            f"{step}: {error}"
        ) in message, message
        add_sub_works(srv)


def test_the_environment_allowlist_keeps_the_rest_from_stubs(tmp_path: Path) -> None:
    repo = build_repository(tmp_path / "repo", MODELS)
    args = [*explicit(MODELS), "--backend-config=tritonpy,stub-env-allowlist=PATH,TRITONPY_*, HOME"]
    srv = TritonServer(
        repo, tmp_path, args=args, prefix=["env", "TRITONPY_SECRET_TOKEN_X=1", "CLOUD_SECRET=2"]
    )
    with running(srv):
        names = ask(srv, "env")
        assert isinstance(names, list)
        assert "CLOUD_SECRET" not in names and "TRITONPY_SECRET_TOKEN_X" in names, names
        assert "PATH" in names and "HOME" in names, names
        # LC_CTYPE: Python's own C-locale coercion (PEP 538) sets it.
        allowed = {"PATH", "HOME", "LC_CTYPE"} | {n for n in names if n.startswith("TRITONPY_")}
        assert set(names) <= allowed, names
        add_sub_works(srv)


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("stub-sandbox=maybe", "'stub-sandbox' must be true or false, got 'maybe'"),
        ("stub-sandbox-uid=0", "stub-sandbox-uid must not be 0"),
        ("stub-sandbox-max-processes=0", "stub-sandbox-max-processes must be at least 1"),
        ("stub-env-allowlist=PATH,A=B", "stub-env-allowlist takes variable names"),
        ("stub-sandbox-network=open", "stub-sandbox-network must be none or host, got 'open'"),
        ("stub-sandbox-tmp-bytes=10", "stub-sandbox-tmp-bytes must be at least 4096"),
        (
            "stub-sandbox-read-paths=relative/dir",
            "stub-sandbox-read-paths takes absolute paths separated by ':', got 'relative/dir'",
        ),
    ],
)
def test_a_bad_sandbox_setting_names_the_key(tmp_path: Path, setting: str, expected: str) -> None:
    srv = TritonServer(
        build_repository(tmp_path / "repo", ["add_sub"]),
        tmp_path,
        args=[f"--backend-config=tritonpy,{setting}"],
    )
    try:
        deadline = time.monotonic() + DEADLINE
        while expected not in srv.log() and srv.proc.poll() is None:
            assert time.monotonic() < deadline, srv.log()[-2000:]
            time.sleep(0.1)
        assert expected in srv.log(), srv.log()[-2000:]
    finally:
        srv.stop()
