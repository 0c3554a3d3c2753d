# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The engine through a real tritonserver and real clients: async execute
concurrency, decoupled streaming over gRPC (sync and asyncio clients) and
HTTP generate_stream, cancellation, parameters, rescheduling, readiness."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import json
import queue
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository, explicit, run_example_client, wait_gone

MODELS = [
    "square",
    "repeat",
    "mock_llm",
    "async_sleep",
    "async_until_cancelled",
    "params",
    "params_decoupled",
    "iterate",
    "iterate_decoupled",
    "add_sub",
    "async_meet",
]


@pytest.fixture(scope="module")
def engine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("engine")
    srv = TritonServer(
        build_repository(work / "repo", MODELS),
        work,
        args=[
            *explicit(MODELS),
            "--exit-timeout-secs=10",
        ],
    )
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop_after_cancelled_streams()


# ------------------------------------------------------------------ async default mode


def test_async_execute_runs_batches_concurrently(engine_server: TritonServer) -> None:
    """64 requests on one instance whose execute waits until 64 of them
    run at once: each saw all 64 (one at a time, the first would have
    waited alone for two minutes)."""

    async def run() -> list[int]:
        async with httpaio.InferenceServerClient(engine_server.http_url) as c:

            async def one() -> int:
                n = httpaio.InferInput("N", [1], "INT32")
                n.set_data_from_numpy(np.array([64], np.int32))
                r = await c.infer("async_meet", [n])
                return int(r.as_numpy("STARTED")[0])

            return await asyncio.gather(*(one() for _ in range(64)))

    assert asyncio.run(run()) == [64] * 64


def test_async_request_cancelled_by_the_client(engine_server: TritonServer) -> None:
    """The client gives up on a request the model holds (an async execute
    waiting up to 60 s for its cancellation): the model sees its request
    cancelled and says so. The cancel follows the model's line saying it
    holds the request, so a loaded machine cannot make it come first."""
    c = grpcclient.InferenceServerClient(engine_server.grpc_url)
    try:
        x = grpcclient.InferInput("IN", [1], "INT32")
        x.set_data_from_numpy(np.array([1], np.int32))
        done: queue.Queue = queue.Queue()
        ctx = c.async_infer(
            "async_until_cancelled",
            [x],
            lambda result, error: done.put(error),
            request_id="given-up",
        )
        held = "async_until_cancelled: request 'given-up' held"
        assert engine_server.wait_log(held, timeout=120), engine_server.log()[-3000:]
        ctx.cancel()
        assert done.get(timeout=120) is not None  # the client's call ended cancelled
        # Logged once the model's wait ended: True only if the cancellation
        # reached it, not after its minute.
        said = "async_until_cancelled: request 'given-up' cancelled="
        assert engine_server.wait_log(said, timeout=120), engine_server.log()[-3000:]
        assert f"{said}True" in engine_server.log(), engine_server.log()[-3000:]
        # The instance serves the next request.
        s = grpcclient.InferInput("SLEEP_MS", [1], "FP32")
        s.set_data_from_numpy(np.array([1], np.float32))
        assert c.infer("async_sleep", [x, s], client_timeout=60).as_numpy("OUT").tolist() == [1]
    finally:
        c.close()


# ------------------------------------------------------------------ decoupled


def stream(
    server: TritonServer, model: str, requests: list[tuple[list[Any], str]], timeout: float = 30
) -> dict[str, list[Any]]:
    """Send requests on one gRPC stream; collect responses per request id
    until each got its final flag."""
    results: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(server.grpc_url)
    c.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for inputs, rid in requests:
            c.async_stream_infer(model, inputs, request_id=rid, enable_empty_final_response=True)
        got: dict[str, list[Any]] = {rid: [] for _, rid in requests}
        open_ids = set(got)
        deadline = time.monotonic() + timeout
        while open_ids:
            r, e = results.get(timeout=max(0.1, deadline - time.monotonic()))
            if e is not None:
                raise e
            resp = r.get_response()
            if resp.outputs:
                got[resp.id].append(r)
            if resp.parameters["triton_final_response"].bool_param:
                open_ids.discard(resp.id)
        return got
    finally:
        c.stop_stream()
        c.close()


def i32(name: str, values: list[int]) -> Any:
    t = grpcclient.InferInput(name, [len(values)], "INT32")
    t.set_data_from_numpy(np.array(values, np.int32))
    return t


def test_square_counts_including_zero(engine_server: TritonServer) -> None:
    got = stream(engine_server, "square", [([i32("IN", [n])], str(n)) for n in (0, 1, 4, 7)])
    for n in (0, 1, 4, 7):
        assert [int(r.as_numpy("OUT")[0]) for r in got[str(n)]] == [n] * n


def test_repeat_from_a_thread_after_execute_returned(engine_server: TritonServer) -> None:
    values = list(range(10, 30))
    got = stream(engine_server, "repeat", [([i32("IN", values)], "a")])
    assert [int(r.as_numpy("OUT")[0]) for r in got["a"]] == values
    assert [int(r.as_numpy("IDX")[0]) for r in got["a"]] == list(range(20))


def test_many_streams_on_one_async_instance(engine_server: TritonServer) -> None:
    """128 concurrent streams x 50 tokens against one async decoupled instance:
    every stream complete, every token in order, exactly one final each."""
    streams, tokens = 128, 50

    def one(i: int) -> list[int]:
        prompt = grpcclient.InferInput("PROMPT", [1], "BYTES")
        prompt.set_data_from_numpy(np.array([f"s{i} a b c".encode()], dtype=object))
        count = grpcclient.InferInput("MAX_TOKENS", [1], "INT32")
        count.set_data_from_numpy(np.array([tokens], np.int32))
        got = stream(engine_server, "mock_llm", [([prompt, count], f"s{i}")], timeout=120)
        return [int(r.as_numpy("INDEX")[0]) for r in got[f"s{i}"]]

    with cf.ThreadPoolExecutor(streams) as pool:
        results = list(pool.map(one, range(streams)))
    # stream() returns only once each request saw exactly one final flag.
    assert all(seen == list(range(tokens)) for seen in results)


def test_stream_cancelled_mid_way_frees_the_request(engine_server: TritonServer) -> None:
    """Cancel a slow stream from the client: the model sees it, stops, and
    the instance goes on serving other streams."""

    async def run() -> int:
        async with grpcaio.InferenceServerClient(engine_server.grpc_url) as client:
            inputs = [
                grpcaio.InferInput("PROMPT", [1], "BYTES"),
                grpcaio.InferInput("MAX_TOKENS", [1], "INT32"),
                grpcaio.InferInput("TOKEN_DELAY_MS", [1], "FP32"),
            ]
            inputs[0].set_data_from_numpy(np.array([b"slow stream"], dtype=object))
            inputs[1].set_data_from_numpy(np.array([100000], np.int32))
            inputs[2].set_data_from_numpy(np.array([5], np.float32))

            async def reqs() -> Any:
                yield {"model_name": "mock_llm", "inputs": inputs, "request_id": "c"}

            it = client.stream_infer(reqs())
            n = 0
            async for _result, error in it:
                assert error is None
                n += 1
                if n == 5:
                    it.cancel()
                    break
            return n

    assert asyncio.run(run()) == 5
    # Still serving.
    got = stream(engine_server, "square", [([i32("IN", [3])], "after")])
    assert len(got["after"]) == 3


def test_generate_stream_sse(engine_server: TritonServer) -> None:
    body = json.dumps({"PROMPT": "hello world", "MAX_TOKENS": 4}).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{engine_server.http_port}/v2/models/mock_llm/generate_stream",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    events = [
        json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")
    ]
    assert [e["TEXT"] for e in events] == ["hello", "world", "hello", "world"]
    assert [e["INDEX"] for e in events] == [0, 1, 2, 3]


# ------------------------------------------------------------------ example clients

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    "example,args,oks",
    [
        ("square", ["3", "0", "5"], 3),
        ("mock_llm", ["--streams", "16", "--tokens", "10"], 1),
    ],
)
def test_example_streaming_clients(
    engine_server: TritonServer, example: str, args: list[str], oks: int
) -> None:
    run_example_client(example, "--grpc", engine_server.grpc_url, *args, oks=oks)


# ------------------------------------------------------------------ parameters


def test_parameters_http_default_mode(engine_server: TritonServer) -> None:
    c = httpclient.InferenceServerClient(engine_server.http_url)
    try:
        x = httpclient.InferInput("X", [1], "INT32")
        x.set_data_from_numpy(np.array([1], np.int32))
        r = c.infer("params", [x], parameters={"temperature": "hot", "top_k": 5, "greedy": True})
        seen = json.loads(r.as_numpy("PARAMS")[0])
        assert seen == {"greedy": True, "temperature": "hot", "top_k": 5}
        params = r.get_response()["parameters"]
        assert params["answered_by"] == "tritonpy" and params["count"] == 3
        assert params["echoed"] is True and params["top_k"] == 5
    finally:
        c.close()


@pytest.mark.parametrize("model", ["params", "params_decoupled"])
def test_parameters_grpc(engine_server: TritonServer, model: str) -> None:
    x = i32("X", [1])
    if model == "params":
        c = grpcclient.InferenceServerClient(engine_server.grpc_url)
        try:
            r = c.infer(model, [x], parameters={"mode": "fast", "n": 2})
        finally:
            c.close()
        results = [r]
    else:
        results = []
        q: queue.Queue = queue.Queue()
        c = grpcclient.InferenceServerClient(engine_server.grpc_url)
        c.start_stream(callback=lambda result, error: q.put((result, error)))
        try:
            c.async_stream_infer(model, [x], parameters={"mode": "fast", "n": 2})
            r, e = q.get(timeout=60)
            assert e is None
            results.append(r)
        finally:
            c.stop_stream()
            c.close()
    r = results[0]
    assert json.loads(r.as_numpy("PARAMS")[0]) == {"mode": "fast", "n": 2}
    p = r.get_response().parameters
    assert p["answered_by"].string_param == "tritonpy"
    assert p["n"].int64_param == 2 and p["echoed"].bool_param is True


def test_double_parameter_reaches_the_model_as_a_float(engine_server: TritonServer) -> None:
    """request.parameters() writes a double as the official backend does
    (2.0, 0.1: shortest round trip, with a fraction), so json.loads gives
    the model a float back, never an int."""
    c = grpcclient.InferenceServerClient(engine_server.grpc_url)
    try:
        r = c.infer("params", [i32("X", [1])], parameters={"ratio": 2.0, "p": 0.1, "n": 3})
    finally:
        c.close()
    seen = r.as_numpy("PARAMS")[0].decode()
    assert seen == '{"n": 3, "p": 0.1, "ratio": 2.0}', seen


# ------------------------------------------------------------------ rescheduling


def test_reschedule_default_mode(engine_server: TritonServer) -> None:
    c = grpcclient.InferenceServerClient(engine_server.grpc_url)
    try:
        n = grpcclient.InferInput("N", [1, 1], "INT32")
        n.set_data_from_numpy(np.array([[4]], np.int32))
        # Iterative sequences are implicit: no sequence id or flags from the client.
        r = c.infer("iterate", [n], request_id="it-default")
        assert int(r.as_numpy("COUNT").reshape(-1)[0]) == 4
    finally:
        c.close()


def test_reschedule_decoupled(engine_server: TritonServer) -> None:
    n = grpcclient.InferInput("N", [1, 1], "INT32")
    n.set_data_from_numpy(np.array([[3]], np.int32))
    q: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(engine_server.grpc_url)
    c.start_stream(callback=lambda result, error: q.put((result, error)))
    try:
        c.async_stream_infer("iterate_decoupled", [n], request_id="it-decoupled")
        counts = []
        while len(counts) < 3:
            r, e = q.get(timeout=60)
            assert e is None, e
            counts.append(int(r.as_numpy("COUNT").reshape(-1)[0]))
        assert counts == [1, 2, 3]
    finally:
        c.stop_stream()
        c.close()


# ------------------------------------------------------------------ unload


def test_unload_with_streams_in_flight(tmp_path: Path) -> None:
    srv = TritonServer(
        build_repository(tmp_path / "repo", ["mock_llm"]),
        tmp_path,
        args=[
            "--model-control-mode=explicit",
            "--load-model=mock_llm",
            "--backend-config=tritonpy,finalize-grace-seconds=0.5",
        ],
    )
    try:
        srv.wait_ready()
        stubs = srv.stubs()
        errors: queue.Queue = queue.Queue()
        streaming: set[str] = set()

        def on_event(result: Any, error: Any) -> None:
            if error is not None:
                errors.put(error)
            else:
                streaming.add(result.get_response().id)

        c = grpcclient.InferenceServerClient(srv.grpc_url)
        c.start_stream(callback=on_event)
        for i in range(4):
            p = grpcclient.InferInput("PROMPT", [1], "BYTES")
            p.set_data_from_numpy(np.array([b"long"], dtype=object))
            m = grpcclient.InferInput("MAX_TOKENS", [1], "INT32")
            m.set_data_from_numpy(np.array([100000], np.int32))
            d = grpcclient.InferInput("TOKEN_DELAY_MS", [1], "FP32")
            d.set_data_from_numpy(np.array([10], np.float32))
            c.async_stream_infer("mock_llm", [p, m, d], request_id=str(i))
        deadline = time.monotonic() + 60
        while len(streaming) < 4:  # every stream has sent a token
            assert time.monotonic() < deadline, f"streams {streaming} of 4 started"
            time.sleep(0.05)
        h = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        start = time.monotonic()
        h.unload_model("mock_llm")
        # Every stream learns why it ended: the streams would run for
        # 1000 s, only the unload ends them within the wait, after its grace
        # (a lower bound: load makes it longer).
        msgs = [str(errors.get(timeout=60)) for _ in range(4)]
        print(f"streams ended {time.monotonic() - start:.2f} s after the unload (grace 0.5 s)")
        assert time.monotonic() - start >= 0.5
        assert all("unloaded" in m and "mock_llm" in m for m in msgs), msgs
        # Triton finalizes the instance once the client's stream is closed;
        # then the stub goes too.
        c.stop_stream()
        c.close()
        assert not wait_gone(stubs), "stub outlived its model"
        h.close()
    finally:
        srv.stop()


def test_unload_with_async_batches_in_flight(tmp_path: Path) -> None:
    srv = TritonServer(
        build_repository(tmp_path / "repo", ["async_meet"]),
        tmp_path,
        args=[
            "--model-control-mode=explicit",
            "--load-model=async_meet",
            "--backend-config=tritonpy,finalize-grace-seconds=0.3",
        ],
    )
    try:
        srv.wait_ready()
        stubs = srv.stubs()

        def held(i: int) -> str:
            c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
            try:
                n = httpclient.InferInput("N", [1], "INT32")
                n.set_data_from_numpy(np.array([0], np.int32))
                c.infer("async_meet", [n], request_id=f"held-{i}")
                return "answered"
            except InferenceServerException as e:
                return str(e)
            finally:
                c.close()

        with cf.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(held, i) for i in range(8)]
            deadline = time.monotonic() + 60
            while (n := srv.log().count("async_meet: request 'held-")) < 8:
                assert time.monotonic() < deadline, f"{n} of 8 requests in execute"
                time.sleep(0.05)
            h = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
            start = time.monotonic()
            h.unload_model("async_meet")
            # They would wait forever: only the unload ends them, after its
            # grace (a lower bound: load makes it longer).
            msgs = [f.result(timeout=120) for f in futures]
            elapsed = time.monotonic() - start
            h.close()
        print(f"unload took {elapsed:.2f} s with a 0.3 s grace period")
        assert elapsed >= 0.3, elapsed
        assert all("unloaded" in m and "async_meet" in m for m in msgs), msgs
        assert not wait_gone(stubs), "stub outlived its model"
    finally:
        srv.stop()
