# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""TRITONPY_DEBUG=1 resource counters: after each kind of load (default,
decoupled, errors, cancellation, BLS) both sides of every instance go back
to zero live requests, batches, senders, tasks, BLS calls and arena bytes.

The counters are read from the idle lines both sides write to Triton's log
(docs/configuration.md, *Debug counters*)."""

from __future__ import annotations

import os
import queue
import re
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository

MODELS = [
    "add_sub",
    "add_sub_any",
    "identity",
    "errors",
    "square",
    "repeat",
    "async_until_cancelled",
    "bls_add_sub",
    "bls_square_stream",
    "shapes",
]
LINE = re.compile(r"tritonpy-debug (stub|backend) (.*?) idle: ((?:\w+=\d+ ?)+)")
# Fields that tell how much work was seen, not what is still held.
PROGRESS = {"batches_total", "bytes_copied"}


@pytest.fixture(scope="module")
def debug_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("debug")
    saved = os.environ.get("TRITONPY_DEBUG")
    os.environ["TRITONPY_DEBUG"] = "1"  # inherited by tritonserver and its stubs
    try:
        srv = TritonServer(
            build_repository(work / "repo", MODELS), work, args=["--exit-timeout-secs=10"]
        )
    finally:
        if saved is None:
            del os.environ["TRITONPY_DEBUG"]
        else:
            os.environ["TRITONPY_DEBUG"] = saved
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop_after_cancelled_streams()


def last_lines(server: TritonServer, model: str) -> dict[tuple[str, str], dict[str, int]]:
    """The last idle line of each side of each instance of ``model``."""
    out = {}
    for side, who, body in LINE.findall(server.log()):
        instance = re.search(r"instance '([^']+)'", who)
        name = instance.group(1) if instance else who
        if name.rsplit("_", 2)[0] == model:
            out[(side, name)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", body)}
    return out


def stub_line(server: TritonServer, model: str, batches: int = 0) -> dict[str, int]:
    """The last idle line of ``model``'s (one) stub, once it has seen
    ``batches`` batches (the line after the last one may still be due)."""
    deadline = time.monotonic() + 60
    while True:
        lines = [v for (side, _), v in last_lines(server, model).items() if side == "stub"]
        line = lines[0] if lines else {"batches_total": 0, "bytes_copied": 0}
        if line["batches_total"] >= batches or time.monotonic() > deadline:
            assert line["batches_total"] == batches or not batches, (model, line, batches)
            return line
        time.sleep(0.1)


def wait_idle(
    server: TritonServer,
    model: str,
    before: dict[tuple[str, str], dict[str, int]],
    timeout: float = 60.0,
) -> dict[tuple[str, str], dict[str, int]]:
    """Wait until both sides of ``model`` wrote an idle line after the load
    (batches_total moved) with every resource counter at zero."""
    deadline = time.monotonic() + timeout
    while True:
        now = last_lines(server, model)
        sides = {side for side, _ in now}
        moved = [
            k
            for k, v in now.items()
            if v["batches_total"] > before.get(k, {}).get("batches_total", 0)
        ]
        held = {k: {f: n for f, n in v.items() if n and f not in PROGRESS} for k, v in now.items()}
        if (
            sides == {"stub", "backend"}
            and {s for s, _ in moved} == sides
            and not any(held.values())
        ):
            return now
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{model}: counters not back to zero after the load; last "
                f"idle lines {now}, before the load {before}"
            )
        time.sleep(0.1)


def check(server: TritonServer, model: str, load: Any) -> dict[tuple[str, str], dict[str, int]]:
    before = last_lines(server, model)
    load()
    after = wait_idle(server, model, before)
    stub = [v for (side, _), v in after.items() if side == "stub"]
    assert stub and set(stub[0]) >= {"requests", "senders", "tasks", "bls_calls", "arena_bytes"}
    backend = [v for (side, _), v in after.items() if side == "backend"]
    assert backend and set(backend[0]) >= {"batches", "requests", "arena_bytes", "bls_arena_bytes"}
    return after


def http(server: TritonServer) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(server.http_url)


def add_sub_inputs(n: int, target: str = "") -> list[httpclient.InferInput]:
    out = []
    for name in ("INPUT0", "INPUT1"):
        t = httpclient.InferInput(name, [n], "FP32")
        t.set_data_from_numpy(np.arange(n, dtype=np.float32))
        out.append(t)
    if target:
        t = httpclient.InferInput("TARGET", [1], "BYTES")
        t.set_data_from_numpy(np.array([target.encode()], dtype=object))
        out.append(t)
    return out


def stream(
    server: TritonServer,
    model: str,
    inputs: list[grpcclient.InferInput],
    cancel_after: int | None = None,
    request_id: str = "",
) -> int:
    """One request on a gRPC stream; returns the responses received. With
    ``cancel_after`` the stream is cancelled after that many responses."""
    results: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(server.grpc_url)
    c.start_stream(callback=lambda result, error: results.put((result, error)))
    got = 0
    try:
        c.async_stream_infer(model, inputs, request_id=request_id, enable_empty_final_response=True)
        while True:
            result, error = results.get(timeout=30)
            assert error is None, error
            if cancel_after is not None and got >= cancel_after:
                c.stop_stream(cancel_requests=True)
                return got
            response = result.get_response()
            if result.as_numpy("OUT") is not None:
                got += 1
            if response.parameters["triton_final_response"].bool_param:
                return got
    finally:
        c.stop_stream()
        c.close()


def test_default_mode_returns_to_zero(debug_server: TritonServer) -> None:
    def load() -> None:
        c = http(debug_server)
        for n in (4, 1 << 18):  # inline tensors, then arena tensors (1 MiB)
            for _ in range(5):
                r = c.infer("add_sub_any", add_sub_inputs(n))
                assert r.as_numpy("OUTPUT0").shape == (n,)

    check(debug_server, "add_sub_any", load)

    def big_identity() -> None:
        c = http(debug_server)
        t = httpclient.InferInput("IN_FP32", [1 << 20], "FP32")
        t.set_data_from_numpy(np.ones(1 << 20, np.float32))
        out = httpclient.InferRequestedOutput("OUT_FP32", binary_data=True)
        for _ in range(3):
            assert c.infer("identity", [t], outputs=[out]).as_numpy("OUT_FP32").sum() == 1 << 20

    before = stub_line(debug_server, "identity")
    check(debug_server, "identity", big_identity)
    # Each 4 MiB output is its input, sent back by reference: no copy.
    after = stub_line(debug_server, "identity", before["batches_total"] + 3)
    assert after["bytes_copied"] == before["bytes_copied"]


def test_outputs_written_in_place_are_not_copied(debug_server: TritonServer) -> None:
    """shapes answers with BIG, a 4 MiB array of its own (copied into the
    stub's arena), and FILLED, 4 MiB written in place with
    pb_utils.Tensor.empty (sent by reference): the stub's copy counter
    grows by BIG's bytes alone."""
    before = stub_line(debug_server, "shapes")

    def load() -> None:
        c = http(debug_server)
        x = httpclient.InferInput("X", [2, 2], "FP32")
        x.set_data_from_numpy(np.ones((2, 2), np.float32))
        for _ in range(3):
            r = c.infer("shapes", [x])
            assert (r.as_numpy("FILLED") == 4).all() and r.as_numpy("BIG").nbytes == 4 << 20

    check(debug_server, "shapes", load)
    after = stub_line(debug_server, "shapes", before["batches_total"] + 3)
    assert after["bytes_copied"] - before["bytes_copied"] == 3 * (4 << 20)


def test_decoupled_returns_to_zero(debug_server: TritonServer) -> None:
    def load() -> None:
        for n in (3, 0, 5):
            x = grpcclient.InferInput("IN", [1], "INT32")
            x.set_data_from_numpy(np.array([n], np.int32))
            assert stream(debug_server, "square", [x]) == n

    check(debug_server, "square", load)

    def from_thread() -> None:
        x = grpcclient.InferInput("IN", [4], "INT32")
        x.set_data_from_numpy(np.arange(4, dtype=np.int32))
        assert stream(debug_server, "repeat", [x]) == 4

    check(debug_server, "repeat", from_thread)


def test_errors_return_to_zero(debug_server: TritonServer) -> None:
    def load() -> None:
        c = http(debug_server)
        for mode in ("raise", "count", "type", "error", "bad_output", "ok"):
            t = httpclient.InferInput("MODE", [1], "BYTES")
            t.set_data_from_numpy(np.array([mode.encode()], dtype=object))
            if mode == "ok":
                assert c.infer("errors", [t]).as_numpy("OUT").tolist() == [7]
            else:
                with pytest.raises(InferenceServerException):
                    c.infer("errors", [t])

    check(debug_server, "errors", load)


def test_cancellation_returns_to_zero(debug_server: TritonServer) -> None:
    """Requests the models saw cancelled (each logs it) leave nothing held:
    a request an async execute holds for up to 60 s, given up by the
    client, and a stream of responses 50 ms apart cancelled after 2 (long
    enough, 5 minutes, that only the cancellation ends it)."""

    def given_up() -> None:
        c = grpcclient.InferenceServerClient(debug_server.grpc_url)
        try:
            x = grpcclient.InferInput("IN", [1], "INT32")
            x.set_data_from_numpy(np.array([1], np.int32))
            for i in range(3):
                done: queue.Queue = queue.Queue()
                ctx = c.async_infer(
                    "async_until_cancelled",
                    [x],
                    lambda result, error, q=done: q.put(error),
                    request_id=f"given-up-{i}",
                )
                # Cancelled once the model holds it, not racing its way there.
                held = f"async_until_cancelled: request 'given-up-{i}' held"
                assert debug_server.wait_log(held, timeout=120), debug_server.log()[-3000:]
                ctx.cancel()
                assert done.get(timeout=120) is not None
        finally:
            c.close()
        for i in range(3):
            said = f"async_until_cancelled: request 'given-up-{i}' cancelled="
            assert debug_server.wait_log(said, timeout=120), debug_server.log()[-3000:]
            assert f"{said}True" in debug_server.log(), debug_server.log()[-3000:]

    check(debug_server, "async_until_cancelled", given_up)

    def cancelled_stream() -> None:
        # 6000 values: a stall of any length still finds it mid-stream.
        x = grpcclient.InferInput("IN", [6000], "INT32")
        x.set_data_from_numpy(np.arange(6000, dtype=np.int32))
        d = grpcclient.InferInput("DELAY", [1], "UINT32")
        d.set_data_from_numpy(np.array([50], np.uint32))
        got = stream(debug_server, "repeat", [x, d], cancel_after=2, request_id="stopped")
        assert got == 2
        seen = "repeat: request 'stopped' cancelled after "
        assert debug_server.wait_log(seen, timeout=60), debug_server.log()[-3000:]

    check(debug_server, "repeat", cancelled_stream)


def test_bls_returns_to_zero(debug_server: TritonServer) -> None:
    def load() -> None:
        c = http(debug_server)
        # BLS outputs inline, then in the backend's BLS arena.
        for n, target in ((4, "add_sub"), (1 << 18, "add_sub_any")):
            for _ in range(3):
                r = c.infer("bls_add_sub", add_sub_inputs(n, target))
                assert r.as_numpy("OUTPUT1").shape == (n,)

    check(debug_server, "bls_add_sub", load)
