# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Business logic scripting and the model loading API through a real
tritonserver: sync and async BLS onto add_sub, a decoupled model streaming
from square through async BLS, cancelling an inner stream, request and
response parameters, int and str correlation ids, model_version, errors
(unknown model or version, bad input, timeout), 200 concurrent async_exec
calls, self-call detection, load/unload/ready, and the bls example's own
client."""

from __future__ import annotations

import json
import queue
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from checks import X, Y, add_sub_inputs
from server import (
    EXAMPLES,
    TritonServer,
    build_repository,
    eventually,
    explicit,
    run_example_client,
    running,
)

MODELS = [
    "add_sub",
    "add_sub_any",
    "square",
    "async_sleep",
    "bls",
    "bls_add_sub",
    "bls_add_sub_async",
    "bls_square_stream",
    "stream_until_cancelled",
    "bls_self",
    "bls_loader",
    "accumulate",
    "bls_sequence",
    "bls_forward",
    "bls_forward_sync",
    "echo_request",
    "echo_request_decoupled",
]
# In the repository, loaded by the tests through the model loading API.
UNLOADED = ["repeat"]


@pytest.fixture(scope="module")
def bls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("bls")
    srv = TritonServer(
        build_repository(work / "repo", MODELS + UNLOADED),
        work,
        args=explicit(MODELS),
    )
    with running(srv):
        yield srv


_CLIENTS: list = []


def http_client(srv: TritonServer, timeout: float = 60.0) -> httpclient.InferenceServerClient:
    """A client closed after the test: a connection left open (e.g. held by
    a failed test's traceback) would delay the server's shutdown."""
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=timeout)
    _CLIENTS.append(c)
    return c


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


@pytest.mark.parametrize("model", ["bls_add_sub", "bls_add_sub_async", "bls"])
def test_bls_onto_add_sub(bls_server: TritonServer, model: str) -> None:
    c = http_client(bls_server)
    r = c.infer(model, add_sub_inputs(X, Y))
    assert np.allclose(r.as_numpy("OUTPUT0"), X + Y)
    assert np.allclose(r.as_numpy("OUTPUT1"), X - Y)


def test_sync_bls_under_concurrent_load(bls_server: TritonServer) -> None:
    """The backend sends a sync model's next batch while execute() waits in
    exec(): the stub must hold it until execute() returns, not run it inside."""
    import concurrent.futures as cf

    def one(i: int) -> bool:
        c = httpclient.InferenceServerClient(bls_server.http_url, network_timeout=60)
        try:
            x = X + i
            r = c.infer("bls_add_sub", add_sub_inputs(x, Y))
            return bool(
                np.allclose(r.as_numpy("OUTPUT0"), x + Y)
                and np.allclose(r.as_numpy("OUTPUT1"), x - Y)
            )
        finally:
            c.close()

    with cf.ThreadPoolExecutor(16) as pool:
        assert all(pool.map(one, range(64)))


def sequence_step(
    c: httpclient.InferenceServerClient, seq: int, x: int, flags: int, use_async: bool
):
    ins = []
    for name, value, dtype in (
        ("X", np.array([x], np.int32), "INT32"),
        ("SEQ", np.array([seq], np.uint64), "UINT64"),
        ("FLAGS", np.array([flags], np.uint32), "UINT32"),
        ("ASYNC", np.array([use_async]), "BOOL"),
    ):
        t = httpclient.InferInput(name, [1], dtype)
        t.set_data_from_numpy(value)
        ins.append(t)
    r = c.infer("bls_sequence", ins)
    return int(r.as_numpy("SUM")[0]), int(r.as_numpy("CORRID")[0])


@pytest.mark.parametrize("use_async", [False, True], ids=["exec", "async_exec"])
def test_bls_on_a_stateful_model(bls_server: TritonServer, use_async: bool) -> None:
    """BLS calls carry correlation ids and sequence flags to a model with
    the sequence batcher: two interleaved sequences keep their own sums, END
    forgets one, and a request outside any started sequence comes back as
    the caller's response error."""
    start, end = 1, 2  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END
    c = http_client(bls_server)
    a, b = (1001, 2002) if use_async else (3003, 4004)
    assert sequence_step(c, a, 1, start, use_async) == (1, a)
    assert sequence_step(c, b, 10, start, use_async) == (10, b)
    assert sequence_step(c, a, 2, 0, use_async) == (3, a)
    assert sequence_step(c, b, 20, 0, use_async) == (30, b)
    assert sequence_step(c, a, 3, end, use_async) == (6, a)
    assert sequence_step(c, b, 30, end, use_async) == (60, b)
    with pytest.raises(InferenceServerException) as e:
        sequence_step(c, a, 5, 0, use_async)  # a ended: Triton refuses it
    assert "START" in str(e.value) or "never started" in str(e.value), e.value
    assert sequence_step(c, a, 7, start | end, use_async) == (7, a)


def forward(srv: TritonServer, caller: str = "bls_forward", **call: object) -> list[dict]:
    """bls_forward (or ``caller``) makes the BLS call ``call`` describes;
    returns what it saw of each response (the callee's SEEN and the
    response parameters, or the error)."""
    t = httpclient.InferInput("CALL", [1], "BYTES")
    t.set_data_from_numpy(np.array([json.dumps(call).encode()], object))
    return json.loads(http_client(srv).infer(caller, [t]).as_numpy("RESULT")[0])


PARAMS = {"flag": True, "off": False, "n": 7, "big": 1 << 40, "neg": -3, "s": "x", "e": ""}


@pytest.mark.parametrize("use_async", [False, True], ids=["exec", "async_exec"])
def test_bls_request_and_response_parameters(bls_server: TritonServer, use_async: bool) -> None:
    """The callee gets the BLS request's parameters with their types, and
    the caller reads the parameters the callee set on its response."""
    got = forward(bls_server, model="echo_request", parameters=PARAMS, **{"async": use_async})
    assert got == [
        {
            "seen": {"parameters": PARAMS, "correlation_id": 0, "version": 2},
            "parameters": {**PARAMS, "echo_version": 2},
        }
    ]
    got = forward(bls_server, model="echo_request", **{"async": use_async})
    assert got[0]["seen"]["parameters"] == {} and got[0]["parameters"] == {"echo_version": 2}


@pytest.mark.parametrize("use_async", [False, True], ids=["exec", "async_exec"])
def test_decoupled_bls_response_parameters(bls_server: TritonServer, use_async: bool) -> None:
    """Each response of a decoupled BLS stream carries its own parameters
    (and not the gRPC frontend's triton_final_response)."""
    got = forward(
        bls_server,
        model="echo_request_decoupled",
        parameters={"k": "v"},
        decoupled=True,
        **{"async": use_async},
    )
    seen = {"parameters": {"k": "v"}, "correlation_id": 0, "version": 1}
    assert got == [
        {"seen": seen, "parameters": {"k": "v", "echo_version": 1}},
        {"seen": seen, "parameters": {"part": 2}},
    ]


@pytest.mark.parametrize("decoupled", [False, True], ids=["single", "decoupled"])
@pytest.mark.parametrize(
    "caller,use_async",
    [("bls_forward_sync", False), ("bls_forward", False), ("bls_forward", True)],
    ids=["sync-model-exec", "async-model-exec", "async-model-async_exec"],
)
def test_bls_response_too_large_for_a_frame_is_an_error(
    bls_server: TritonServer, caller: str, use_async: bool, decoupled: bool
) -> None:
    """A response whose parameters (300 KB) cannot fit in a BLS_RESPONSE
    frame reaches the caller as an error naming the called model; the call
    ends (it used to wait forever), and the responses after it in a stream
    still arrive."""
    model = "echo_request_decoupled" if decoupled else "echo_request"
    big = {"big": "x" * 300_000}
    got = forward(
        bls_server,
        caller,
        model=model,
        parameters=big,
        decoupled=decoupled,
        **{"async": use_async},
    )
    assert len(got) == (2 if decoupled else 1), got
    assert got[0]["error"].startswith(
        f"tritonpy: BLS response from model '{model}' too large for a frame: "
    ), got
    assert re.search(r"\(3\d{5} bytes of parameters", got[0]["error"]), got
    if decoupled:
        assert got[1]["parameters"] == {"part": 2}
    # The instance is free again: an ordinary call still answers.
    got = forward(bls_server, caller, model="echo_request", **{"async": use_async})
    assert got[0]["parameters"] == {"echo_version": 2}


@pytest.mark.parametrize("corrid", [42, "session-7"], ids=["int", "str"])
@pytest.mark.parametrize("use_async", [False, True], ids=["exec", "async_exec"])
def test_bls_correlation_id_reaches_the_callee(
    bls_server: TritonServer, corrid: int | str, use_async: bool
) -> None:
    got = forward(bls_server, model="echo_request", correlation_id=corrid, **{"async": use_async})
    assert got[0]["seen"]["correlation_id"] == corrid


@pytest.mark.parametrize("use_async", [False, True], ids=["exec", "async_exec"])
def test_bls_model_version(bls_server: TritonServer, use_async: bool) -> None:
    """model_version picks the callee's version (-1, the default: the
    latest); a version that is not loaded is the BLS response's error."""
    for version, answered in ((1, 1), (2, 2), (-1, 2)):
        got = forward(
            bls_server, model="echo_request", model_version=version, **{"async": use_async}
        )
        assert got[0]["seen"]["version"] == answered, (version, got)
    got = forward(bls_server, model="echo_request", model_version=3, **{"async": use_async})
    # The official backend's text first, then Triton's own reason.
    assert len(got) == 1 and list(got[0]) == ["error"], got
    official = (
        "Model echo_request - Error when running inference: Failed for execute "
        "the inference request. Model 'echo_request' is not ready. ("
    )
    assert got[0]["error"].startswith(official) and got[0]["error"].endswith(")"), got
    assert "3" in got[0]["error"][len(official) :], got


def test_large_outputs_come_back_intact(bls_server: TritonServer) -> None:
    """1 MiB outputs: written by Triton into the BLS arena, read in place."""
    c = http_client(bls_server)
    x = np.arange(1 << 18, dtype=np.float32)
    y = np.ones(1 << 18, np.float32)
    for model in ("bls_add_sub", "bls_add_sub_async"):
        for _ in range(5):
            r = c.infer(model, add_sub_inputs(x, y, TARGET=np.array([b"add_sub_any"], object)))
            assert np.array_equal(r.as_numpy("OUTPUT0"), x + y)


@pytest.mark.parametrize("model", ["bls_add_sub", "bls_add_sub_async"])
def test_unknown_model_is_a_response_error(bls_server: TritonServer, model: str) -> None:
    # In the official backend's words, which Triton's own BLS tests match.
    c = http_client(bls_server)
    with pytest.raises(InferenceServerException) as e:
        c.infer(model, add_sub_inputs(X, Y, TARGET=np.array([b"nope"], object)))
    assert (
        "Model nope - Error when running inference: Failed for execute the inference "
        "request. Model 'nope' is not ready." in str(e.value)
    ), e.value


@pytest.mark.parametrize("model", ["bls_add_sub", "bls_add_sub_async"])
def test_bad_input_is_a_response_error(bls_server: TritonServer, model: str) -> None:
    c = http_client(bls_server)
    with pytest.raises(InferenceServerException, match="(?i)shape|INPUT0"):
        c.infer(model, add_sub_inputs(X, Y, TARGET=np.array([b"bad_shape"], object)))


@pytest.mark.parametrize("model", ["bls_add_sub", "bls_add_sub_async"])
def test_timeout_is_a_response_error(bls_server: TritonServer, model: str) -> None:
    c = http_client(bls_server, 30)
    # The target answers after 3 s: only the call's timeout can fail it.
    with pytest.raises(InferenceServerException, match="BLS call timed out"):
        c.infer(
            model,
            add_sub_inputs(
                X,
                Y,
                TARGET=np.array([b"async_sleep"], object),
                TIMEOUT_US=np.array([100_000], np.int64),
            ),
        )


def test_200_async_exec_in_flight_without_threads(bls_server: TritonServer) -> None:
    c = http_client(bls_server)
    r = c.infer("bls_add_sub_async", add_sub_inputs(X, Y, FANOUT=np.array([200], np.int32)))
    assert np.allclose(r.as_numpy("OUTPUT0"), X + Y)


def test_the_server_still_answers_after_errors(bls_server: TritonServer) -> None:
    c = http_client(bls_server)
    for _ in range(20):
        r = c.infer("bls_add_sub", add_sub_inputs(X, Y))
        assert np.allclose(r.as_numpy("OUTPUT1"), X - Y)


def test_self_call_fails_with_a_clear_error(bls_server: TritonServer) -> None:
    c = http_client(bls_server, 20)
    x = httpclient.InferInput("IN", [1], "INT32")
    x.set_data_from_numpy(np.array([1], np.int32))
    # A deadlock would end only with the client's timeout, not this error.
    with pytest.raises(InferenceServerException, match="deadlock"):
        c.infer("bls_self", [x])


def stream(bls_server: TritonServer, n: int, request_id: str = "", **extra: np.ndarray) -> list:
    got: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(bls_server.grpc_url)
    c.start_stream(callback=lambda result, error: got.put((result, error)))
    ins = []
    for name, arr in (("IN", np.array([n], np.int32)), *extra.items()):
        t = grpcclient.InferInput(
            name, [1], {np.dtype(np.int32): "INT32", np.dtype(bool): "BOOL"}[arr.dtype]
        )
        t.set_data_from_numpy(arr)
        ins.append(t)
    c.async_stream_infer(
        "bls_square_stream", ins, request_id=request_id, enable_empty_final_response=True
    )
    out = []
    while True:
        result, error = got.get(timeout=60)
        assert error is None, error
        if result.get_response().parameters["triton_final_response"].bool_param:
            break
        out.append(int(result.as_numpy("OUT")[0]))
    c.stop_stream()
    c.close()
    return out


@pytest.mark.parametrize("sync", [False, True])
def test_decoupled_model_streams_from_square(bls_server: TritonServer, sync: bool) -> None:
    assert stream(bls_server, 5, SYNC=np.array([sync])) == [5] * 5
    assert stream(bls_server, 0, SYNC=np.array([sync])) == []


def test_many_streams_at_once(bls_server: TritonServer) -> None:
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda n: stream(bls_server, n % 7), range(48)))
    assert results == [[n % 7] * (n % 7) for n in range(48)]


@pytest.mark.parametrize("sync", [False, True])
def test_cancelling_an_inner_stream_ends_it(bls_server: TritonServer, sync: bool) -> None:
    """The caller cancels the inner stream after 2 responses. The inner
    model then waits for its cancellation, logs that it saw it and ends the
    stream: the caller got 2 responses in all (never cancelled, the inner
    model would send 2 more after 60 s, past this test's deadline)."""
    rid = f"cancel-inner-{sync}"
    out = stream(bls_server, 0, rid, CANCEL_AFTER=np.array([2], np.int32), SYNC=np.array([sync]))
    assert out == [1, 2, -3]  # two inner responses, then the count (-1 - 2)
    seen = f"stream_until_cancelled: request '{rid}' saw the cancellation after 2 responses"
    assert bls_server.wait_log(seen), bls_server.log()[-3000:]


def load(bls_server: TritonServer, op: str, name: str, **kw: str) -> bool:
    c = http_client(bls_server)
    ins = []
    for key, value in (("OP", op), ("NAME", name), *((k.upper(), v) for k, v in kw.items())):
        t = httpclient.InferInput(key, [1], "BYTES")
        t.set_data_from_numpy(np.array([value.encode()], object))
        ins.append(t)
    return bool(c.infer("bls_loader", ins).as_numpy("READY")[0])


def test_load_unload_and_is_model_ready(bls_server: TritonServer) -> None:
    assert load(bls_server, "ready", "repeat") is False
    assert load(bls_server, "load", "repeat") is True
    assert bls_server.model_ready("repeat")
    # Raises if the unload fails; it does not wait for the model to go, so
    # what it answers about readiness may be either.
    load(bls_server, "unload", "repeat")

    def unloaded() -> None:
        assert not bls_server.model_ready("repeat")
        assert load(bls_server, "ready", "repeat") is False  # as the model API sees it

    eventually(unloaded, timeout=60)


def test_load_with_config_and_files(bls_server: TritonServer) -> None:
    source = (EXAMPLES / "add_sub" / "model.py").read_text()
    config = (
        '{"name":"files_add_sub","backend":"tritonpy","max_batch_size":0,'
        '"input":[{"name":"INPUT0","data_type":"TYPE_FP32","dims":[4]},'
        '{"name":"INPUT1","data_type":"TYPE_FP32","dims":[4]}],'
        '"output":[{"name":"OUTPUT0","data_type":"TYPE_FP32","dims":[4]},'
        '{"name":"OUTPUT1","data_type":"TYPE_FP32","dims":[4]}]}'
    )
    assert load(bls_server, "load_files", "files_add_sub", config=config, file=source) is True
    c = http_client(bls_server)
    r = c.infer("files_add_sub", add_sub_inputs(X, Y))
    assert np.allclose(r.as_numpy("OUTPUT0"), X + Y)


def test_load_of_a_missing_model_is_an_error(bls_server: TritonServer) -> None:
    with pytest.raises(InferenceServerException, match="load_model"):
        load(bls_server, "load", "no_such_model")


def test_bls_example_client(bls_server: TritonServer) -> None:
    run_example_client("bls", "--http", bls_server.http_url, oks=3)


def test_stub_threads_unchanged(bls_server: TritonServer) -> None:
    """The async BLS instance runs no extra threads after many calls."""

    def threads_of(pid: int) -> int:
        return len(list(Path(f"/proc/{pid}/task").iterdir()))

    c = http_client(bls_server)
    c.infer("bls_add_sub_async", add_sub_inputs(X, Y))
    before = {p: threads_of(p) for p in bls_server.stubs()}
    c.infer("bls_add_sub_async", add_sub_inputs(X, Y, FANOUT=np.array([200], np.int32)))
    after = {p: threads_of(p) for p in bls_server.stubs() if p in before}
    assert after == {p: before[p] for p in after}
