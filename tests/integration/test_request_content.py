# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Request content is data, and a frame carries text of any size (issue 31,
items 1 and 2): a request id that is not UTF-8, a shape whose byte size
overflows, a 300 KB exception message, a 300 KB log line and a 200 KB
request id each get an answer, over HTTP and gRPC where the transport
carries them, and the stub that served them keeps serving (same pid, no
death in the server's log)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository, running

MODEL = "request_content"
BATCHED = "request_content_batched"
# INT32 elements whose byte size is 2**64: it wraps to 0 in 64-bit arithmetic.
HUGE = 2**62


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("request_content")
    server = TritonServer(build_repository(work / "repo", [MODEL, BATCHED]), work)
    with running(server):
        yield server


@pytest.fixture
def same_stubs(srv: TritonServer) -> Iterator[None]:
    """The test's requests cost no stub: the same stub processes serve
    after it, and the server's log says nothing died."""
    before = sorted(srv.stubs())
    log_from = srv.log_size()
    assert before, "no stub runs"
    yield
    echo(srv, "after")  # the stub still answers
    assert sorted(srv.stubs()) == before
    tail = srv.log()[log_from:]
    for word in ("died", "protocol violation", "killing the stub", "MAX_FRAME"):
        assert word not in tail, tail[-3000:]


def post(srv: TritonServer, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("localhost", srv.http_port, timeout=120)
    try:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def echo(srv: TritonServer, request_id: str) -> np.ndarray:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        inp = httpclient.InferInput("IN", [3], "INT32")
        inp.set_data_from_numpy(np.array([1, 2, 3], np.int32))
        result = c.infer(MODEL, [inp], request_id=request_id)
        assert result.as_numpy("OUT").tolist() == [1, 2, 3]
        return result.as_numpy("ID")
    finally:
        c.close()


def http_infer(srv: TritonServer, mode: str, request_id: str) -> InferenceServerException | None:
    """One request with MODE over HTTP; its error, or None."""
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        x = httpclient.InferInput("IN", [1], "INT32")
        x.set_data_from_numpy(np.array([7], np.int32))
        m = httpclient.InferInput("MODE", [1], "BYTES")
        m.set_data_from_numpy(np.array([mode.encode()], dtype=object))
        c.infer(MODEL, [x, m], request_id=request_id)
    except InferenceServerException as e:
        return e
    finally:
        c.close()
    return None


def grpc_infer(srv: TritonServer, mode: str, request_id: str) -> InferenceServerException | None:
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    try:
        x = grpcclient.InferInput("IN", [1], "INT32")
        x.set_data_from_numpy(np.array([7], np.int32))
        m = grpcclient.InferInput("MODE", [1], "BYTES")
        m.set_data_from_numpy(np.array([mode.encode()], dtype=object))
        c.infer(MODEL, [x, m], request_id=request_id, client_timeout=120)
    except InferenceServerException as e:
        return e
    finally:
        c.close()
    return None


# ---------------------------------------------------------------- item 1


def test_a_request_id_that_is_not_utf8_is_answered(srv: TritonServer, same_stubs: None) -> None:
    raw = b"bad-\xff\xfe-id"
    body = (
        b'{"id":"'
        + raw
        + b'","inputs":[{"name":"IN","shape":[2],"datatype":"INT32","data":[5,6]}]}'
    )
    status, answer = post(
        srv, f"/v2/models/{MODEL}/infer", body, {"Content-Type": "application/json"}
    )
    assert status == 200, answer
    doc = json.loads(answer.decode("utf-8", "replace"))
    outputs = {o["name"]: o["data"] for o in doc["outputs"]}
    assert outputs["OUT"] == [5, 6]
    # The model sees the id with each byte that is not UTF-8 replaced.
    assert outputs["ID"] == [raw.decode("utf-8", "replace")]


def overflow_http(
    srv: TritonServer, model: str, request_id: str, dims: list[int]
) -> tuple[int, str]:
    """IN with shape `dims` (its byte size overflows) and no bytes at all
    (binary, binary_data_size 0)."""
    header = json.dumps(
        {
            "id": request_id,
            "inputs": [
                {
                    "name": "IN",
                    "shape": dims,
                    "datatype": "INT32",
                    "parameters": {"binary_data_size": 0},
                }
            ],
        }
    ).encode()
    status, answer = post(
        srv,
        f"/v2/models/{model}/infer",
        header,
        {
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(header)),
        },
    )
    return status, answer.decode("utf-8", "replace")


def overflow_grpc(srv: TritonServer, model: str, request_id: str, dims: list[int]) -> grpc.RpcError:
    request = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    request.inputs.add(name="IN", datatype="INT32", shape=dims)
    request.raw_input_contents.append(b"")
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    try:
        with pytest.raises(grpc.RpcError) as failed:
            c._client_stub.ModelInfer(request, timeout=120)
    finally:
        c.close()
    return failed.value


def assert_names_the_overflow(message: str, model: str, request_id: str) -> None:
    assert f"model '{model}'" in message, message
    assert f"request '{request_id}'" in message, message
    assert "input 'IN'" in message, message


def test_a_shape_whose_byte_size_overflows_is_invalid_over_http(
    srv: TritonServer, same_stubs: None
) -> None:
    status, message = overflow_http(srv, MODEL, "ovf-http", [HUGE])
    assert status == 400, message
    assert_names_the_overflow(message, MODEL, "ovf-http")


def test_a_shape_whose_byte_size_overflows_is_invalid_over_grpc(
    srv: TritonServer, same_stubs: None
) -> None:
    e = overflow_grpc(srv, MODEL, "ovf-grpc", [HUGE])
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    assert_names_the_overflow(e.details() or "", MODEL, "ovf-grpc")


def test_a_bytes_input_whose_elements_overrun_its_bytes_is_invalid(
    srv: TritonServer, same_stubs: None
) -> None:
    # One BYTES element that says it has 16 bytes, and has 2.
    data = b"\x10\x00\x00\x00ab"
    header = json.dumps(
        {
            "id": "bytes-short",
            "inputs": [
                {"name": "IN", "shape": [1], "datatype": "INT32", "data": [1]},
                {
                    "name": "MODE",
                    "shape": [1],
                    "datatype": "BYTES",
                    "parameters": {"binary_data_size": len(data)},
                },
            ],
        }
    ).encode()
    status, answer = post(
        srv,
        f"/v2/models/{MODEL}/infer",
        header + data,
        {
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(header)),
        },
    )
    message = answer.decode("utf-8", "replace")
    assert status == 400, message
    assert "request 'bytes-short'" in message and "input 'MODE'" in message, message


def test_in_a_batch_the_bad_request_fails_alone(srv: TritonServer, same_stubs: None) -> None:
    """Four requests fill one dynamic batch (the model waits a minute for
    a full one); the one whose shape overflows fails, the others are
    answered, and they were batched together."""
    answers: dict[str, object] = {}

    def good(i: int) -> None:
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        try:
            inp = httpclient.InferInput("IN", [1, i + 1], "INT32")
            inp.set_data_from_numpy(np.arange(i + 1, dtype=np.int32).reshape(1, -1))
            r = c.infer(BATCHED, [inp], request_id=f"good-{i}")
            answers[f"good-{i}"] = (r.as_numpy("OUT").tolist(), int(r.as_numpy("BATCH")[0][0]))
        except InferenceServerException as e:
            answers[f"good-{i}"] = e
        finally:
            c.close()

    def bad() -> None:
        answers["bad"] = overflow_http(srv, BATCHED, "bad-in-batch", [1, HUGE])

    threads = [threading.Thread(target=good, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=bad))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    status, message = answers["bad"]  # type: ignore[misc]
    assert status == 400, message
    assert_names_the_overflow(message, BATCHED, "bad-in-batch")
    for i in range(3):
        out, batch = answers[f"good-{i}"]  # type: ignore[misc]
        assert out == [list(range(i + 1))]
        # The model got the three good requests of the batch of four.
        assert batch == 3, answers


# ---------------------------------------------------------------- item 2


def assert_carries_big(message: str) -> None:
    """The model's 300 KB text, whole or visibly cut."""
    assert "BIG-START" in message, message[:300]
    assert "BIG-END" in message or "[truncated, " in message, message[-300:]


def test_a_300kb_exception_message_is_answered_over_http(
    srv: TritonServer, same_stubs: None
) -> None:
    e = http_infer(srv, "raise_big", "raise-big-http")
    assert e is not None and e.status() == "500", e
    assert_carries_big(e.message())


def test_a_300kb_exception_message_is_answered_over_grpc(
    srv: TritonServer, same_stubs: None
) -> None:
    # gRPC carries the message in its trailers, which a client may refuse
    # at that size: an error answer is what is asked of the server.
    assert grpc_infer(srv, "raise_big", "raise-big-grpc") is not None


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_a_300kb_log_line_is_logged_and_the_request_answered(
    srv: TritonServer, same_stubs: None, transport: str
) -> None:
    at = srv.log_size()
    infer = http_infer if transport == "http" else grpc_infer
    assert infer(srv, "log_big", f"log-big-{transport}") is None
    assert srv.wait_log("BIG-START", after=at, timeout=60)
    assert srv.wait_log(" BIG-END", after=at, timeout=60)


def test_a_200kb_request_id_on_a_failing_request_over_http(
    srv: TritonServer, same_stubs: None
) -> None:
    rid = "r" * 200_000
    e = http_infer(srv, "fail", rid)
    assert e is not None and e.status() == "500", e
    assert "request_content fails on purpose" in e.message()


def test_a_200kb_request_id_on_a_failing_request_over_grpc(
    srv: TritonServer, same_stubs: None
) -> None:
    assert grpc_infer(srv, "fail", "g" * 200_000) is not None
