# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Hangs and crash loops: an execute that outruns the execute timeout is
killed and its stub restarted; a stub that keeps dying at start is given up
with the reason; unload and shutdown finish within their grace period even
while a model is stuck in execute."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from checks import ask
from server import TritonServer, build_repository, explicit, running, wait_gone

GRACE = 1  # finalize-grace-seconds of these servers
# crash_timeout's execute_timeout_seconds: far above the 50 to 600 ms of the
# executes that must not be killed (a stall of a loaded machine stretches
# them), and far below 16 (sync_prefetch_batches) of the 600 ms ones.
EXECUTE_TIMEOUT = 5
EXIT_TIMEOUT = 3
MODELS = ["crash", "crash_timeout", "crash_loop"]
ARGS = [
    *explicit(MODELS),
    f"--backend-config=tritonpy,finalize-grace-seconds={GRACE}",
    "--backend-config=tritonpy,stub-restart-limit=2",
]


@pytest.fixture(scope="module")
def hang_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("hangs")
    srv = TritonServer(build_repository(work / "repo", MODELS), work, args=ARGS)
    with running(srv):
        yield srv


def test_execute_timeout_kills_and_restarts_the_stub(hang_server: TritonServer) -> None:
    pid = ask(hang_server, "ok", "crash_timeout")
    start = time.monotonic()
    with pytest.raises(InferenceServerException) as e:
        ask(hang_server, "hang", "crash_timeout")
    elapsed = time.monotonic() - start
    msg = str(e.value)
    # A lower bound only (load makes it longer); the message says the
    # timeout ended it, not the hour-long sleep or the client.
    assert elapsed >= EXECUTE_TIMEOUT, elapsed
    assert "model 'crash_timeout' instance 'crash_timeout_0_0'" in msg, msg
    assert "'req-hang'" in msg and f"execute timeout ({EXECUTE_TIMEOUT} s)" in msg, msg
    assert ask(hang_server, "ok", "crash_timeout") != pid
    # Work shorter than the timeout is untouched.
    assert ask(hang_server, "slow", "crash_timeout") == ask(hang_server, "ok", "crash_timeout")


def test_execute_timeout_counts_from_the_start_of_execute(hang_server: TritonServer) -> None:
    """24 requests of 600 ms at once on a sync instance with a 5 s timeout:
    up to 16 batches sent ahead wait in the stub (sync_prefetch_batches),
    the later of them (up to 9 s) longer than the timeout, and their
    timeout starts when their execute does, so none is killed. Each
    execute stays far inside the timeout however slowly a loaded machine
    runs it."""
    pid = ask(hang_server, "ok", "crash_timeout")
    with ThreadPoolExecutor(24) as pool:
        pids = list(pool.map(lambda _: ask(hang_server, "long", "crash_timeout"), range(24)))
    assert pids == [pid] * 24


def test_crash_loop_is_given_up_with_the_reason(hang_server: TritonServer) -> None:
    ask(hang_server, "ok", "crash_loop")
    with pytest.raises(InferenceServerException):
        ask(hang_server, "die", "crash_loop")
    # The restarts exit in initialize: after stub-restart-limit of them the
    # instance is unavailable, and says why.
    deadline = time.monotonic() + 60
    msg = ""
    while "stub-restart-limit=2" not in msg:
        assert time.monotonic() < deadline, msg
        time.sleep(0.2)
        try:
            ask(hang_server, "ok", "crash_loop")
        except InferenceServerException as e:
            msg = str(e)
    assert "model 'crash_loop' instance 'crash_loop_0_0' is unavailable" in msg, msg
    assert "exited with status 5" in msg and "load the model again" in msg, msg
    # Fixed and loaded again, it serves.
    (hang_server.repo / "crash_loop" / "started").unlink()
    c = httpclient.InferenceServerClient(hang_server.http_url, network_timeout=60)
    try:
        c.unload_model("crash_loop")
        deadline = time.monotonic() + 60
        while hang_server.model_ready("crash_loop"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        c.load_model("crash_loop")
    finally:
        c.close()
    assert ask(hang_server, "ok", "crash_loop") > 0


def hang_in_background(server: TritonServer, model: str) -> list[str]:
    errors: list[str] = []

    def run() -> None:
        try:
            ask(server, "hang", model)
            errors.append("answered")
        except Exception as e:  # noqa: BLE001 - also a connection closed by a server exit
            errors.append(str(e))

    mark = server.log_size()
    threading.Thread(target=run, daemon=True).start()
    assert server.wait_log("crash: req-hang hangs in execute", after=mark), server.log()[mark:]
    return errors


def test_unload_with_a_hung_model_ends_within_its_grace(hang_server: TritonServer) -> None:
    stubs = set(hang_server.stubs())
    errors = hang_in_background(hang_server, "crash")
    start = time.monotonic()
    c = httpclient.InferenceServerClient(hang_server.http_url, network_timeout=60)
    try:
        c.unload_model("crash")
        deadline = time.monotonic() + 120
        while hang_server.model_ready("crash") or not errors:
            assert time.monotonic() < deadline, "unload did not finish"
            time.sleep(0.05)
        elapsed = time.monotonic() - start
        # The stub is gone, the others are not.
        deadline = time.monotonic() + 30
        while len(set(hang_server.stubs()) & stubs) != len(stubs) - 1:
            assert time.monotonic() < deadline, (stubs, hang_server.stubs())
            time.sleep(0.05)
        # What ended it is the grace (a lower bound: it was waited), not
        # the hour-long sleep nor the FINALIZE timeout behind it.
        assert elapsed >= GRACE, elapsed
        assert "unloaded with this request in flight" in errors[0], errors
        assert f"after the unload's finalize-grace-seconds ({GRACE} s)" in errors[0], errors
        print(f"unload with a hung execute took {elapsed:.2f} s (grace {GRACE} s)")
        c.load_model("crash")
    finally:
        c.close()
    assert ask(hang_server, "ok", "crash") > 0


def test_shutdown_with_a_hung_model_ends_within_its_grace(tmp_path: Path) -> None:
    """Triton's own bound applies: on SIGTERM it waits up to
    --exit-timeout-secs for client connections (the hung request holds
    one) and in-flight work, then exits 1 ("Exit timeout expired"). The
    hung stub does not outlive it."""
    srv = TritonServer(
        build_repository(tmp_path / "repo", ["crash"]),
        tmp_path,
        args=[
            f"--backend-config=tritonpy,finalize-grace-seconds={GRACE}",
            f"--exit-timeout-secs={EXIT_TIMEOUT}",
        ],
    )
    try:
        srv.wait_ready()
        stubs = srv.stubs()
        errors = hang_in_background(srv, "crash")
        start = time.monotonic()
        code = srv.stop(timeout=30)
        elapsed = time.monotonic() - start
    finally:
        srv.stop()
    print(f"shutdown with a hung execute took {elapsed:.2f} s (exit timeout {EXIT_TIMEOUT} s)")
    # The server ended by itself (stop() would have killed it after 30 s:
    # code -9): cleanly, or by Triton's exit timeout, which it says.
    assert code == 0 or (code == 1 and "Exit timeout expired" in srv.log()), (
        code,
        srv.log()[-3000:],
    )
    assert not wait_gone(stubs), "the hung stub outlived the server"
    deadline = time.monotonic() + 30  # the client sees its connection end
    while not errors:
        assert time.monotonic() < deadline, "the hung request never ended"
        time.sleep(0.05)
    assert "answered" not in errors, errors
