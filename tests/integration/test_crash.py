# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A stub that dies is seen at once, fails only its in-flight requests with
a message that says what happened, and comes back."""

from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository


@pytest.fixture(scope="module")
def crash_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("crash")
    srv = TritonServer(build_repository(work / "repo", ["crash", "add_sub"]), work)
    try:
        srv.wait_ready()
        yield srv
    finally:
        stubs = srv.stubs()
        assert srv.stop() == 0
        time.sleep(0.2)
        assert not [p for p in stubs if os.path.exists(f"/proc/{p}")], "stubs outlived the server"


def ask(server: TritonServer, m: str) -> int:
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=30)
    try:
        inp = httpclient.InferInput("MODE", [1], "BYTES")
        inp.set_data_from_numpy(np.array([m.encode()], dtype=object))
        return int(c.infer("crash", [inp]).as_numpy("PID")[0])
    finally:
        c.close()


def wait_for_new_stub(server: TritonServer, old: int, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            pid = ask(server, "ok")
            if pid != old:
                return pid
        except InferenceServerException as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"no new stub after {timeout}s: {last}")


def test_stub_dying_in_execute_fails_that_request_and_restarts(crash_server: TritonServer) -> None:
    pid = ask(crash_server, "ok")
    start = time.monotonic()
    with pytest.raises(InferenceServerException) as e:
        ask(crash_server, "die")
    assert time.monotonic() - start < 5
    msg = str(e.value)
    assert "crash" in msg and "signal 9" in msg, msg
    new = wait_for_new_stub(crash_server, pid)
    assert new != pid and ask(crash_server, "ok") == new


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
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        for f in futures:
            f.result(timeout=120)
    assert errors, "killing the stub mid-load should fail its in-flight request"
    assert all("crash" in m and ("died" in m or "restart" in m or "unavailable" in m.lower())
               for m in errors), errors[:3]
    assert len(errors) < 200
    new = wait_for_new_stub(crash_server, pid)
    assert new != pid
    # The other model never noticed.
    c = httpclient.InferenceServerClient(crash_server.http_url)
    try:
        x = httpclient.InferInput("INPUT0", [4], "FP32")
        x.set_data_from_numpy(np.ones(4, np.float32))
        y = httpclient.InferInput("INPUT1", [4], "FP32")
        y.set_data_from_numpy(np.ones(4, np.float32))
        assert c.infer("add_sub", [x, y]).as_numpy("OUTPUT0").tolist() == [2, 2, 2, 2]
    finally:
        c.close()


def test_ready_again_after_restart(crash_server: TritonServer) -> None:
    pid = ask(crash_server, "ok")
    os.kill(pid, signal.SIGKILL)
    wait_for_new_stub(crash_server, pid)
    assert crash_server.model_ready("crash")


def test_server_shutdown_leaves_no_stub(tmp_path: Path) -> None:
    srv = TritonServer(build_repository(tmp_path / "repo", ["add_sub"]), tmp_path)
    try:
        srv.wait_ready()
        stubs = srv.stubs()
        assert len(stubs) == 1
    finally:
        assert srv.stop() == 0
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{stubs[0]}")


def test_stubs_inherit_no_descriptors(crash_server: TritonServer) -> None:
    """Each stub holds exactly one socket (its own), nothing of the server's
    (listening ports, other stubs' sockets, the backend's arenas)."""
    def fds(pid: int) -> list[str]:
        out = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                pass
        return out

    stubs = crash_server.stubs()
    assert len(stubs) == 2
    server_sockets = {t for t in fds(crash_server.proc.pid) if t.startswith("socket:")}
    seen: set[str] = set()
    for pid in stubs:
        targets = fds(pid)
        sockets = {t for t in targets if t.startswith("socket:")}
        # A socket pair has two inodes: sharing one means inheriting it.
        assert not sockets & server_sockets, (sockets & server_sockets, targets)
        assert not sockets & seen, "two stubs share a socket"
        seen |= sockets
        assert not [t for t in targets if "tritonpy-arena" in t], targets


def test_server_kill_9_leaves_no_stub(tmp_path: Path) -> None:
    shm_before = set(os.listdir("/dev/shm"))
    srv = TritonServer(build_repository(tmp_path / "repo", ["add_sub"]), tmp_path)
    try:
        srv.wait_ready()
        stubs = srv.stubs()
        srv.proc.kill()
        srv.proc.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in stubs):
            time.sleep(0.05)
        alive = [p for p in stubs if os.path.exists(f"/proc/{p}")]
        assert not alive, f"stubs {alive} outlived a killed server"
        assert set(os.listdir("/dev/shm")) <= shm_before, "shared memory left in /dev/shm"
    finally:
        srv.stop()


def test_tiny_dev_shm_does_not_matter(tmp_path: Path) -> None:
    """Shared memory is not a deployment knob: with /dev/shm mounted at 1 MB
    (a private mount namespace), a 256 MB tensor still round-trips."""
    wrapper = ["unshare", "-m", "sh", "-c",
               'mount -t tmpfs -o size=1m tmpfs /dev/shm && exec "$@"', "tiny-shm"]
    srv = TritonServer(build_repository(tmp_path / "repo", ["identity"]), tmp_path,
                       prefix=wrapper)
    try:
        srv.wait_ready()
        data = np.arange(64 << 20, dtype=np.float32)  # 256 MiB
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=300,
                                             connection_timeout=300)
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
