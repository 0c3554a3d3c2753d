# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A stub that dies is seen at once, fails only its in-flight requests with
a message that says what happened, and comes back."""

from __future__ import annotations

import concurrent.futures as cf
import os
import queue
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from checks import add_sub_works, ask, wait_for_new_stub
from server import (
    TritonServer,
    build_repository,
    load_failure,
    open_files,
    running,
    wait_gone,
    wait_until,
)

CRASH_MODELS = ["crash", "add_sub", "crash_stream", "bls_crash", "crash_pair"]
STUBS = 6  # crash_pair has two instances

# How each death reads in the error message.
DEATHS = {
    "die": "killed by signal 9 (SIGKILL)",
    "exit": "exited with status 3",
    "segv": "killed by signal 11 (SIGSEGV)",
}


@pytest.fixture(scope="module")
def crash_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("crash")
    srv = TritonServer(build_repository(work / "repo", CRASH_MODELS), work)
    try:
        srv.wait_ready()
        yield srv
    finally:
        stubs = srv.stubs()
        assert srv.stop() == 0
        assert not wait_gone(stubs), "stubs outlived the server"


@pytest.mark.parametrize("how", DEATHS)
def test_stub_dying_in_execute_fails_that_request_and_restarts(
    crash_server: TritonServer, how: str
) -> None:
    pid = ask(crash_server, "ok")
    # The request ends with the death (no answer could come): its error
    # names it.
    with pytest.raises(InferenceServerException) as e:
        ask(crash_server, how)
    msg = str(e.value)
    assert "model 'crash' instance 'crash_0_0'" in msg and f"(pid {pid}) died" in msg, msg
    assert DEATHS[how] in msg, msg
    if how == "die":  # SIGKILL from nobody in the backend: most likely the OOM killer
        assert "out-of-memory killer" in msg, msg
    new = wait_for_new_stub(crash_server, pid)
    assert new != pid and ask(crash_server, "ok") == new


def test_memory_error_in_a_model_is_an_error_not_a_crash(crash_server: TritonServer) -> None:
    """An allocation past the address-space limit the model set raises
    MemoryError: that request fails, the stub lives on. (A real OOM kill is
    a SIGKILL from the kernel: the "die" case above.)"""
    pid = ask(crash_server, "ok")
    with pytest.raises(InferenceServerException) as e:
        ask(crash_server, "oom")
    msg = str(e.value)
    assert "MemoryError" in msg and "'crash'" in msg and "req-oom" in msg, msg
    assert ask(crash_server, "ok") == pid


def memory_cgroup(limit: int) -> Path | None:
    """A new memory cgroup (v2, else v1) holding at most `limit` bytes, or
    None where this machine gives no writable memory controller."""
    name = f"tritonpy-oom-{os.getpid()}"
    v2 = Path("/sys/fs/cgroup/cgroup.controllers")
    if v2.exists() and "memory" in v2.read_text().split():
        group, limit_file = v2.parent / name, "memory.max"
    else:
        mine = [
            line.split(":", 2)[2]
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if line.split(":")[1] == "memory"
        ]
        if not mine:
            return None
        group, limit_file = (
            Path("/sys/fs/cgroup/memory", mine[0].lstrip("/"), name),
            "memory.limit_in_bytes",
        )
    try:
        group.mkdir()
        (group / limit_file).write_text(str(limit))
    except OSError:
        return None
    return group


def test_out_of_memory_kill_by_the_kernel(crash_server: TritonServer) -> None:
    """A real OOM kill: the stub is moved into a memory cgroup capped at
    256 MiB and touches 2 GiB; the kernel's OOM killer ends it. That
    request fails with the death and the OOM hint, the stub comes back
    (outside the cgroup) and serves."""
    pid = ask(crash_server, "ok")
    group = memory_cgroup(256 << 20)
    assert group is not None, "no writable memory cgroup on this machine"
    try:
        (group / "cgroup.procs").write_text(str(pid))
        with pytest.raises(InferenceServerException) as e:
            ask(crash_server, "hog")
        msg = str(e.value)
        assert f"(pid {pid}) died" in msg and DEATHS["die"] in msg, msg
        assert "out-of-memory killer" in msg, msg
        new = wait_for_new_stub(crash_server, pid)
        assert ask(crash_server, "ok") == new
    finally:
        deadline = time.monotonic() + 60
        while True:
            try:
                group.rmdir()
                break
            except OSError:  # the dying stub has not left it yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


@pytest.mark.parametrize("how", DEATHS)
def test_stub_dying_mid_stream_fails_the_stream_at_once(
    crash_server: TritonServer, how: str
) -> None:
    """The stream gets its error from the death (the backend sees EOF; the
    stub sends nothing more and no timer could end the stream within the
    wait), then a new stream on the restarted stub runs to its end."""
    stream_ok(crash_server)  # the stub has answered: its death is no crash loop
    events: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(crash_server.grpc_url)
    c.start_stream(callback=lambda result, error: events.put((time.time(), result, error)))
    try:
        x = grpcclient.InferInput("MODE", [1], "BYTES")
        x.set_data_from_numpy(np.array([how.encode()], dtype=object))
        c.async_stream_infer("crash_stream", [x], request_id=f"stream-{how}")
        die_at = None
        while True:
            t, result, error = events.get(timeout=30)
            if error is not None:
                break
            if result.as_numpy("INDEX")[0] == 5:
                die_at = float(result.as_numpy("DIE_AT")[0])
        assert die_at is not None, "the stream failed before its sixth token"
        delay = t - die_at
        msg = str(error)
        assert "model 'crash_stream'" in msg and DEATHS[how] in msg, msg
        print(f"stream error {1000 * delay:.1f} ms after the stub's death ({how})")
    finally:
        c.stop_stream()
        c.close()
    deadline = time.monotonic() + 30
    while not stream_ok(crash_server, strict=False):
        assert time.monotonic() < deadline, "no working stream after the restart"
        time.sleep(0.1)


def stream_ok(server: TritonServer, strict: bool = True) -> bool:
    """One "ok" stream of crash_stream: six tokens in order."""
    events: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(server.grpc_url)
    c.start_stream(callback=lambda result, error: events.put((result, error)))
    try:
        x = grpcclient.InferInput("MODE", [1], "BYTES")
        x.set_data_from_numpy(np.array([b"ok"], dtype=object))
        c.async_stream_infer("crash_stream", [x])
        got = []
        for _ in range(6):
            result, error = events.get(timeout=30)
            if error is not None:
                if strict:
                    raise AssertionError(str(error))
                return False
            got.append(int(result.as_numpy("INDEX")[0]))
        assert got == list(range(6)), got
        return True
    finally:
        c.stop_stream()
        c.close()


def bls(server: TritonServer, mode: str) -> tuple[int, int]:
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=30)
    try:
        inp = httpclient.InferInput("MODE", [1], "BYTES")
        inp.set_data_from_numpy(np.array([mode.encode()], dtype=object))
        r = c.infer("bls_crash", [inp])
        return int(r.as_numpy("PID")[0]), int(r.as_numpy("CALLER_PID")[0])
    finally:
        c.close()


@pytest.mark.parametrize("how", ["die", "segv"])
def test_stub_dying_under_a_bls_call(crash_server: TritonServer, how: str) -> None:
    """The callee dies during the caller's exec(): the caller gets the error
    as the response of its call and keeps serving from the same stub."""
    callee, caller = bls(crash_server, "ok")
    with pytest.raises(InferenceServerException) as e:
        bls(crash_server, how)
    msg = str(e.value)
    assert "bls_crash: the call to 'crash' failed" in msg and DEATHS[how] in msg, msg
    wait_for_new_stub(crash_server, callee)
    new_callee, same_caller = bls(crash_server, "ok")
    assert new_callee != callee and same_caller == caller


def test_only_the_dying_instance_fails(crash_server: TritonServer) -> None:
    """Two instances under load; one dies: the one request it was running
    fails, the other instance answers throughout."""
    # Which idle instance takes a request is Triton's choice: two at a time
    # until each instance has answered (both, before the death).
    before: set[int] = set()
    with cf.ThreadPoolExecutor(2) as pool:

        def both() -> bool:
            before.update(pool.map(lambda _: ask(crash_server, "slow", "crash_pair"), range(2)))
            return len(before) >= 2

        wait_until(both, timeout=60)
    errors: list[str] = []
    pids: list[int] = []

    def worker(i: int) -> None:
        try:
            pids.append(ask(crash_server, "die" if i == 20 else "slow", "crash_pair"))
        except InferenceServerException as e:
            errors.append(str(e))

    with cf.ThreadPoolExecutor(8) as pool:
        list(pool.map(worker, range(60)))
    assert len(errors) == 1, errors
    assert "died" in errors[0] and "crash_pair" in errors[0], errors
    # The survivor answered before and after the death.
    assert len(before) == 2 and set(pids) & before, (before, set(pids))


@pytest.mark.parametrize("forgery", ["forge_arena", "forge_overflow"])
def test_forged_frames_kill_only_that_stub(crash_server: TritonServer, forgery: str) -> None:
    """A model that writes its own frames with a body outside any arena (an
    unknown arena; an offset whose sum with the length wraps around) gets
    its stub killed and restarted; tritonserver and other models go on."""
    pid = ask(crash_server, "ok")
    with pytest.raises(InferenceServerException) as e:
        ask(crash_server, forgery)
    msg = str(e.value)
    assert "protocol violation" in msg, msg
    assert ("unknown stub arena" if forgery == "forge_arena" else "outside stub arena") in msg, msg
    assert "model 'crash'" in msg, msg
    assert crash_server._get("/v2/health/ready") == 200
    wait_for_new_stub(crash_server, pid)
    add_sub_works(crash_server)


def test_kill_9_under_load(crash_server: TritonServer) -> None:
    pid = ask(crash_server, "ok")
    errors: list[str] = []
    answers: list[int] = []

    def worker(i: int) -> None:
        try:
            answers.append(ask(crash_server, "slow"))
        except InferenceServerException as e:
            errors.append(str(e))

    with cf.ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(worker, i) for i in range(200)]
        deadline = time.monotonic() + 60
        while len(answers) < 16:  # the load is on: requests come and go
            assert time.monotonic() < deadline, f"{len(answers)} answers, errors {errors[:3]}"
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        for f in futures:
            f.result(timeout=120)
    assert errors, "killing the stub mid-load should fail its in-flight request"
    assert all(
        "crash" in m and ("died" in m or "restart" in m or "unavailable" in m.lower())
        for m in errors
    ), errors[:3]
    assert len(errors) < 200
    new = wait_for_new_stub(crash_server, pid)
    assert new != pid
    add_sub_works(crash_server)  # the other model never noticed


def test_requests_wait_out_a_restart(crash_server: TritonServer) -> None:
    """A request arriving while the stub restarts waits for the new stub
    instead of failing. (Triton 2.51 gives backends no way to report an
    instance not ready, so /v2/models/crash/ready stays 200 meanwhile.)"""
    pid = ask(crash_server, "ok")
    mark = crash_server.log_size()
    os.kill(pid, signal.SIGKILL)
    # The backend has seen the death and is restarting.
    assert crash_server.wait_log(f"(pid {pid}) died", after=mark), crash_server.log()[mark:]
    asked = crash_server.log_size()
    assert ask(crash_server, "ok") != pid
    assert crash_server.model_ready("crash")
    restarted = "tritonpy: restarted stub for model 'crash' instance"
    print(
        "the request came",
        "during" if restarted in crash_server.log()[asked:] else "after",
        "the restart",
    )


def test_stub_killed_during_initialize_is_not_healthy(tmp_path: Path) -> None:
    """The load fails with the official words first ("Stub process '<instance>'
    is not healthy."), then how the stub died; the server log has them too."""
    repo = build_repository(tmp_path / "repo", ["init_killed"])
    with running(TritonServer(repo, tmp_path, args=["--model-control-mode=explicit"])) as srv:
        message = load_failure(srv, "init_killed")
        official = "Stub process 'init_killed_0_0' is not healthy."
        assert official in message and "killed by signal 9 (SIGKILL)" in message, message
        assert official in srv.log()


def test_server_shutdown_leaves_no_stub(tmp_path: Path) -> None:
    srv = TritonServer(build_repository(tmp_path / "repo", ["add_sub"]), tmp_path)
    try:
        srv.wait_ready()
        stubs = srv.stubs()
        assert len(stubs) == 1
    finally:
        assert srv.stop() == 0
    assert not wait_gone(stubs)


def test_stubs_inherit_no_descriptors(crash_server: TritonServer) -> None:
    """Each stub holds exactly one socket (its own), nothing of the server's
    (listening ports, other stubs' sockets, the backend's arenas)."""
    stubs = crash_server.stubs()
    assert len(stubs) == STUBS
    server_sockets = {t for t in open_files(crash_server.proc.pid) if t.startswith("socket:")}
    seen: set[str] = set()
    for pid in stubs:
        targets = open_files(pid)
        sockets = {t for t in targets if t.startswith("socket:")}
        # A socket pair has two inodes: sharing one means inheriting it.
        assert not sockets & server_sockets, (sockets & server_sockets, targets)
        assert not sockets & seen, "two stubs share a socket"
        seen |= sockets
        assert not [t for t in targets if "tritonpy-arena" in t], targets


def test_server_kill_9_leaves_no_stub(tmp_path: Path) -> None:
    # Official-backend servers of other tests (or other work on the machine)
    # may add their own regions meanwhile: only names tritonpy's processes
    # could make count here (whatever the backend and the stub name starts
    # "tritonpy"; what they map at all is checked below, before the kill).
    def ours() -> set[str]:
        return {n for n in os.listdir("/dev/shm") if "tritonpy" in n.lower()}

    shm_before = ours()
    srv = TritonServer(build_repository(tmp_path / "repo", ["add_sub"]), tmp_path)
    try:
        srv.wait_ready()
        stubs = srv.stubs()
        for pid in [srv.proc.pid, *stubs]:
            with open(f"/proc/{pid}/maps") as f:
                assert "/dev/shm/" not in f.read(), f"process {pid} maps /dev/shm"
        srv.proc.kill()
        srv.proc.wait()
        alive = wait_gone(stubs)
        assert not alive, f"stubs {alive} outlived a killed server"
        assert ours() <= shm_before, "shared memory left in /dev/shm"
    finally:
        srv.stop()


def test_tiny_dev_shm_does_not_matter(tmp_path: Path) -> None:
    """Shared memory is not a deployment knob: with /dev/shm mounted at 1 MB
    (a private mount namespace), a 256 MB tensor still round-trips."""
    wrapper = [
        "unshare",
        "-m",
        "sh",
        "-c",
        'mount -t tmpfs -o size=1m tmpfs /dev/shm && exec "$@"',
        "tiny-shm",
    ]
    srv = TritonServer(build_repository(tmp_path / "repo", ["identity"]), tmp_path, prefix=wrapper)
    try:
        srv.wait_ready()
        data = np.arange(64 << 20, dtype=np.float32)  # 256 MiB
        c = httpclient.InferenceServerClient(
            srv.http_url, network_timeout=300, connection_timeout=300
        )
        try:
            x = httpclient.InferInput("IN_FP32", list(data.shape), "FP32")
            x.set_data_from_numpy(data, binary_data=True)
            out = httpclient.InferRequestedOutput("OUT_FP32", binary_data=True)
            got = c.infer("identity", [x], outputs=[out]).as_numpy("OUT_FP32")
        finally:
            c.close()
        assert got.shape == data.shape and np.array_equal(got, data)
    finally:
        assert srv.stop() == 0
