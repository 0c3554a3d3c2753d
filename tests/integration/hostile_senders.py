# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The hostile requests of hostile_cases.py that take more than one JSON
header: gRPC requests built field by field, streams cancelled or left
mid-way, clients that go away, a batch with one bad request; and the
well-formed request each model must still answer (`probe`)."""

from __future__ import annotations

import json
import queue
import socket
import struct
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

from hostile_requests import (
    DEATH,
    Answer,
    bytes_tensor,
    dumps,
    grpc_infer,
    grpc_patched,
    http_infer,
)
from server import TritonServer, wait_until

__all__ = [
    "FP32x4",
    "NOT_UTF8",
    "PROBES",
    "batch_rows",
    "batch_with_one_bad",
    "disconnect_after_sending",
    "disconnect_mid_stream",
    "echoed_bytes",
    "grpc_bytes",
    "grpc_contents",
    "grpc_id_not_utf8",
    "grpc_name_not_utf8",
    "grpc_params",
    "grpc_shape",
    "grpc_typed_contents",
    "probe",
    "stream_cancel",
]

Sender = Callable[[TritonServer], Answer]

FP32x4 = struct.pack("<4f", 1, 2, 3, 4)
NOT_UTF8 = b"\xff\xfe\xc0\x80 not utf-8 \xed\xa0\x80"
INT64_MAX = 2**63 - 1


def batch_rows(rows: int, **over: Any) -> dict[str, Any]:
    """``rows`` rows of A and B for auto_complete_batch."""
    data = [float(i) for i in range(rows * 3)]
    inputs = [{"name": n, "shape": [rows, 3], "datatype": "FP32", "data": data} for n in "AB"]
    return {"inputs": inputs, **over}


def _one(name: str, datatype: str, shape: list[int], data: list[Any]) -> dict[str, Any]:
    return {"inputs": [{"name": name, "shape": shape, "datatype": datatype, "data": data}]}


# A well-formed request per model (JSON): after every case, the case's
# model must still answer it, from the same stub.
PROBES: dict[str, dict[str, Any]] = {
    "add_sub": {
        "inputs": [
            {"name": n, "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}
            for n in ("INPUT0", "INPUT1")
        ]
    },
    "repeat": _one("IN", "INT32", [3], [1, 2, 3]),
    "iris_preprocess": _one("ROWS", "BYTES", [1], ["5.1, 3.5, 1.4, 0.2"]),
    "auto_complete_batch": batch_rows(2),
    "async_sleep": _one("IN", "INT32", [2], [7, 8]),
    "params": _one("X", "INT32", [1], [1]),
    "identity": _one("IN_INT32", "INT32", [2], [5, 6]),
    "shapes": {**_one("X", "FP32", [2, 2], [1, 2, 3, 4]), "outputs": [{"name": "TRANSPOSED"}]},
}


def probe(srv: TritonServer, model: str) -> Answer:
    """``model`` asked its well-formed request (PROBES): the decoupled
    repeat over a gRPC stream to its final response, the others over HTTP."""
    if model != "repeat":
        return http_infer(srv, model, PROBES[model])
    got: queue.Queue[Any] = queue.Queue()
    c = grpcclient.InferenceServerClient(srv.grpc)  # 127.0.0.1
    values: list[int] = []
    try:
        c.start_stream(callback=lambda result, error: got.put((result, error)))
        inp = grpcclient.InferInput("IN", [3], "INT32")
        inp.set_data_from_numpy(np.array([1, 2, 3], np.int32))
        c.async_stream_infer("repeat", [inp], enable_empty_final_response=True)
        while True:
            result, error = got.get(timeout=60)
            if error is not None:
                return Answer(False, "STREAM", str(error))
            out = result.as_numpy("OUT")
            values += [] if out is None else out.tolist()
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
        c.stop_stream()
    finally:
        c.close()
    return Answer(values == [1, 2, 3], "OK", f"repeat answered {values}")


def _add_sub_grpc(**fields: Any) -> service_pb2.ModelInferRequest:
    """add_sub's request over gRPC (raw contents), with ``fields`` set."""
    r = service_pb2.ModelInferRequest(model_name="add_sub", **fields)
    for n in ("INPUT0", "INPUT1"):
        r.inputs.add(name=n, datatype="FP32", shape=[4])
        r.raw_input_contents.append(FP32x4)
    return r


def grpc_params(**params: Any) -> Sender:
    """add_sub over gRPC with request parameters ``params``, each in the
    field of its Python type (int past INT64_MAX: uint64_param)."""

    def send(srv: TritonServer) -> Answer:
        r = _add_sub_grpc()
        for k, v in params.items():
            p = r.parameters[k]
            if isinstance(v, bool):
                p.bool_param = v
            elif isinstance(v, int) and v > INT64_MAX:
                p.uint64_param = v
            elif isinstance(v, int):
                p.int64_param = v
            elif isinstance(v, float):
                p.double_param = v
            else:
                p.string_param = v
        return grpc_infer(srv, r.SerializeToString())

    return send


def grpc_contents(count: int) -> Sender:
    """add_sub over gRPC with ``count`` raw_input_contents for 2 inputs."""

    def send(srv: TritonServer) -> Answer:
        r = _add_sub_grpc()
        del r.raw_input_contents[:]
        r.raw_input_contents.extend([FP32x4] * count)
        return grpc_infer(srv, r.SerializeToString())

    return send


def grpc_id_not_utf8(srv: TritonServer) -> Answer:
    placeholder = b"P" * len(NOT_UTF8)
    return grpc_patched(srv, _add_sub_grpc(id=placeholder.decode()), {placeholder: NOT_UTF8})


def grpc_name_not_utf8(srv: TritonServer) -> Answer:
    r = _add_sub_grpc()
    r.inputs[0].name = "Q" * len(NOT_UTF8)
    return grpc_patched(srv, r, {b"Q" * len(NOT_UTF8): NOT_UTF8})


def grpc_typed_contents(srv: TritonServer) -> Answer:
    """INT32 contents for add_sub's FP32 inputs (typed contents, not raw)."""
    r = service_pb2.ModelInferRequest(model_name="add_sub")
    for n in ("INPUT0", "INPUT1"):
        r.inputs.add(name=n, datatype="FP32", shape=[4]).contents.int_contents.extend([1, 2, 3, 4])
    return grpc_infer(srv, r.SerializeToString())


def grpc_shape(
    name: str, datatype: str, shape: list[int], raw: bytes, model: str = "identity"
) -> Sender:
    """``model`` over gRPC: one input of any shape (protobuf dims are int64:
    negative ones too) with ``raw`` as its contents; request id "grpc-shape"."""

    def send(srv: TritonServer) -> Answer:
        r = service_pb2.ModelInferRequest(model_name=model, id="grpc-shape")
        r.inputs.add(name=name, datatype=datatype, shape=shape)
        r.raw_input_contents.append(raw)
        return grpc_infer(srv, r.SerializeToString())

    return send


def grpc_bytes(shape: int, elements: list[bytes]) -> Sender:
    """identity's IN_STRING over gRPC as typed BYTES contents."""

    def send(srv: TritonServer) -> Answer:
        r = service_pb2.ModelInferRequest(model_name="identity")
        t = r.inputs.add(name="IN_STRING", datatype="BYTES", shape=[shape])
        t.contents.bytes_contents.extend(elements)
        return grpc_infer(srv, r.SerializeToString())

    return send


def echoed_bytes(elements: list[bytes]) -> Callable[[Answer], bool]:
    """Whether identity answered exactly ``elements`` in OUT_STRING."""
    return lambda a: bool(a.body.raw_output_contents[0] == bytes_tensor(elements))


def stream_cancel(request_id: str) -> Sender:
    """A gRPC stream to the decoupled repeat (6000 values, 20 ms apart: two
    minutes, so only the cancellation ends it), cancelled after its first
    response: the model must see the cancellation (it logs it, quoting the
    request id)."""

    def send(srv: TritonServer) -> Answer:
        got: queue.Queue[Any] = queue.Queue()
        c = grpcclient.InferenceServerClient(srv.grpc)  # 127.0.0.1
        at = srv.log_size()
        try:
            c.start_stream(callback=lambda result, error: got.put((result, error)))
            inp = grpcclient.InferInput("IN", [6000], "INT32")
            inp.set_data_from_numpy(np.arange(6000, dtype=np.int32))
            delay = grpcclient.InferInput("DELAY", [1], "UINT32")
            delay.set_data_from_numpy(np.array([20], np.uint32))
            c.async_stream_infer("repeat", [inp, delay], request_id=request_id)
            _, error = got.get(timeout=60)
            if error is not None:
                return Answer(False, "STREAM", str(error))
            c.stop_stream(cancel_requests=True)
        finally:
            c.close()
        # The model's log line, or the stub's death (no use waiting then).
        seen = f"repeat: request '{request_id[:64]}"
        wait_until(lambda: seen in srv.log()[at:] or DEATH.search(srv.log()[at:]), 60)
        if seen not in srv.log()[at:]:
            return Answer(False, "CANCELLED", "the model never logged the cancellation")
        return Answer(True, "OK")

    return send


def _post(srv: TritonServer, path: str, body: bytes) -> socket.socket:
    """A socket on which a POST of ``body`` to ``path`` was sent."""
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=60)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    s.sendall(head.encode() + body)
    return s


def ended(srv: TritonServer, model: str) -> tuple[int, int]:
    """How many requests ``model`` has ended so far, (successes, failures):
    Triton's statistics (``/v2/models/<model>/stats``)."""
    url = f"http://127.0.0.1:{srv.http_port}/v2/models/{model}/stats"
    with urllib.request.urlopen(url, timeout=30) as r:
        stats = json.loads(r.read())["model_stats"][0]["inference_stats"]
    return stats["success"]["count"], stats["fail"]["count"]


def disconnect_after_sending(srv: TritonServer) -> Answer:
    """A request to async_sleep (300 ms) whose client closes the
    connection as soon as the request is out. The model still runs it to
    the end: the answer's body is how many more requests of async_sleep
    succeeded and failed once it ended (Triton does not cancel a request
    whose HTTP client left: one success)."""
    body = _one("IN", "INT32", [1], [1])
    body["inputs"].append({"name": "SLEEP_MS", "shape": [1], "datatype": "FP32", "data": [300]})
    before = ended(srv, "async_sleep")
    _post(srv, "/v2/models/async_sleep/infer", dumps(body)).close()
    try:
        wait_until(lambda: ended(srv, "async_sleep") != before, timeout=60)
    except AssertionError:
        return Answer(False, 0, "the request never ended in Triton's statistics")
    after = ended(srv, "async_sleep")
    return Answer(True, "OK", body={"success": after[0] - before[0], "fail": after[1] - before[1]})


def disconnect_mid_stream(srv: TritonServer) -> Answer:
    """An SSE stream (generate_stream) of the decoupled repeat whose client
    goes away after the first event, while the model is sending."""
    body = dumps({"id": "hostile-sse", "IN": list(range(50)), "DELAY": 20})
    with _post(srv, "/v2/models/repeat/generate_stream", body) as s:
        seen = b""
        while b"data:" not in seen:
            chunk = s.recv(65536)
            if not chunk:
                return Answer(False, 0, "closed before an event: " + seen.decode("latin-1"))
            seen += chunk
    return Answer(True, "OK", body=seen)


def batch_with_one_bad(header: dict[str, Any]) -> Sender:
    """Eight requests at once to auto_complete_batch (dynamic batching: they
    may share a batch): seven well-formed, one with ``header``'s fields
    too. Every one must be answered."""

    def send(srv: TritonServer) -> Answer:
        bodies = [batch_rows(2, id=f"good-{i}") for i in range(7)] + [batch_rows(2, **header)]
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = list(pool.map(lambda b: http_infer(srv, "auto_complete_batch", b), bodies))
        bad = [a for a in answers if not a.ok]
        return Answer(not bad, bad[0].status if bad else 200, "; ".join(a.message for a in bad))

    return send
