# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Model code that holds the stub's loop thread (a plain ``def execute`` or
``initialize`` that sleeps or waits, a blocking iteration inside a
coroutine) must not stop the rest: cancellation flags arrive, and the
model's other threads still get their metrics, logs, BLS answers and
response senders through. Also: the model loading API in ``initialize()``,
BLS refused in ``initialize()``/``finalize()`` with the official message,
and ``await async_exec(decoupled=True)`` followed by a plain ``for`` in
several coroutines at once."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from functools import partial

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from server import TritonServer, build_repository, explicit, load_failure, running

MODELS = ["add_sub", "held_sync", "held_stream", "wait_stream", "bls_for_gather"]
LATER = ["held_init", "bls_in_init", "bls_in_finalize"]  # loaded by their tests
OFFICIAL_BLS_MESSAGE = "BLS is only supported during the 'execute' function."


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("threads")
    repo = build_repository(work / "repo", [*MODELS, *LATER])
    args = explicit(MODELS)
    with running(TritonServer(repo, work, args=args)) as s:
        yield s


def wait_for_log(srv: TritonServer, text: str, timeout: float = 30.0) -> float:
    """Seconds until ``text`` is in the server log; fails after ``timeout``."""
    start = time.monotonic()
    while text not in srv.log():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{text!r} not logged in {timeout} s:\n{srv.log()[-3000:]}")
        time.sleep(0.05)
    return time.monotonic() - start


def tag_input(tag: str) -> grpcclient.InferInput:
    x = grpcclient.InferInput("TAG", [1], "BYTES")
    x.set_data_from_numpy(np.array([tag.encode()], dtype=object))
    return x


def test_sync_execute_sees_the_cancellation_while_it_sleeps(srv: TritonServer) -> None:
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    try:
        done: queue.Queue = queue.Queue()
        ctx = c.async_infer(
            "held_sync", [tag_input("cancel-1")], lambda result, error: done.put(error)
        )
        # A line logged from inside the held execute.
        wait_for_log(srv, "held_sync cancel-1: waiting")
        ctx.cancel()
        # It polls is_cancelled() for up to 60 s, then logs what it saw:
        # True only if the cancellation reached the held execute.
        wait_for_log(srv, "held_sync cancel-1: cancelled=", timeout=120)
        assert "held_sync cancel-1: cancelled=True" in srv.log(), srv.log()[-3000:]
        assert done.get(timeout=60) is not None  # the client got its cancellation
    finally:
        c.close()
    # The instance serves on.
    h = httpclient.InferenceServerClient(srv.http_url)
    try:
        x = httpclient.InferInput("TAG", [1], "BYTES")
        x.set_data_from_numpy(np.array([b"threads-after-cancel"], dtype=object))
        assert h.infer("held_sync", [x]).as_numpy("SEEN").tolist() == [True]
    finally:
        h.close()


def test_threads_of_a_sync_execute_use_pb_utils_meanwhile(srv: TritonServer) -> None:
    """execute() joins a thread that makes a BLS call, creates and reads a
    metric and logs: each needs the channel while the loop thread waits."""
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        for tag in ("threads-1", "threads-2"):
            x = httpclient.InferInput("TAG", [1], "BYTES")
            x.set_data_from_numpy(np.array([tag.encode()], dtype=object))
            assert c.infer("held_sync", [x]).as_numpy("SEEN").tolist() == [True], tag
            assert f"held_sync {tag}: thread sum=8" in srv.log()
    finally:
        c.close()


def test_initialize_waiting_for_a_thread_that_creates_metrics(srv: TritonServer) -> None:
    """The vllm_backend shape: initialize() waits on a condition for its
    engine thread, which creates metrics, logs and asks the model loading
    API whether add_sub (loaded) is ready."""
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        c.load_model("held_init")  # hangs for ever without the turns
        assert "held_init engine thread: metric created" in srv.log()
        x = httpclient.InferInput("DUMMY", [1], "INT32")
        x.set_data_from_numpy(np.array([0], np.int32))
        assert c.infer("held_init", [x]).as_numpy("STARTED").tolist() == [True]
        c.unload_model("held_init")
    finally:
        c.close()


def test_decoupled_sync_execute_sends_and_sees_cancel_while_held(srv: TritonServer) -> None:
    """A thread's response leaves while execute keeps the loop thread; the
    client, having it, cancels the stream, and execute sees that."""
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    got: queue.Queue = queue.Queue()
    try:
        c.start_stream(partial(lambda q, result, error: q.put((result, error)), got))
        n = grpcclient.InferInput("N", [1], "INT32")
        n.set_data_from_numpy(np.array([1], np.int32))
        c.async_stream_infer("held_stream", [n], request_id="held-1")
        result, error = got.get(timeout=30)
        assert error is None and result.as_numpy("OUT").tolist() == [1]
        c.stop_stream(cancel_requests=True)
        # It polls for up to 60 s, then logs what it saw.
        wait_for_log(srv, "held_stream: cancelled=", timeout=120)
        assert "held_stream: cancelled=True" in srv.log(), srv.log()[-3000:]
    finally:
        c.close()


def test_plain_for_over_async_exec_streams_in_gathered_coroutines(srv: TritonServer) -> None:
    """Four requests, each forwarded with 'await async_exec(decoupled=True)'
    and iterated with a plain for: the callee has all four in flight at
    once (it waits for them, up to a minute, and reports the most it
    saw), as on the official backend."""
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    got: queue.Queue = queue.Queue()
    try:
        c.start_stream(partial(lambda q, result, error: q.put((result, error)), got))
        for i in range(4):
            w = grpcclient.InferInput("PEERS", [1], "INT32")
            w.set_data_from_numpy(np.array([4], np.int32))
            c.async_stream_infer("bls_for_gather", [w], request_id=f"gather-{i}")
        peaks = []
        for _ in range(4):
            result, error = got.get(timeout=120)
            assert error is None, f"{error.status()}: {error.message()}"
            peaks.append(int(result.as_numpy("PEAK")[0]))
        assert max(peaks) == 4, peaks
    finally:
        c.stop_stream()
        c.close()


def test_bls_in_initialize_fails_the_load_with_the_official_message(srv: TritonServer) -> None:
    message = load_failure(srv, "bls_in_init")
    assert OFFICIAL_BLS_MESSAGE in message or OFFICIAL_BLS_MESSAGE in srv.log(), message


def test_bls_in_finalize_is_refused_with_the_official_message(srv: TritonServer) -> None:
    c = httpclient.InferenceServerClient(srv.http_url)
    try:
        c.load_model("bls_in_finalize")
        c.unload_model("bls_in_finalize")
    finally:
        c.close()
    wait_for_log(srv, OFFICIAL_BLS_MESSAGE)
