# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Requests no well-behaved client sends, written byte by byte: the HTTP
and gRPC senders of the hostile-client suite (test_hostile_clients.py) and
of its randomized run (fuzz_hostile_clients.py, `make fuzz`); the
requests that need more than a header are in hostile_senders.py.

tritonclient checks what it sends (UTF-8 ids, shapes that match the data,
one content per input), so these senders build the request themselves: a
JSON header written by `dumps` (which takes raw ``bytes`` anywhere a
string goes, so that any byte can sit in an id, a key or a name) plus
binary tensor data over a plain HTTP connection, or a serialized
ModelInferRequest (patched where protobuf would refuse the bytes) sent as
is on a gRPC channel. Every answer becomes an `Answer`; a stub death is
what the suite counts apart (StubWatch)."""

from __future__ import annotations

import http.client
import json
import re
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from tritonclient.grpc import service_pb2

from server import TritonServer

__all__ = [
    "DEATH",
    "Answer",
    "StubWatch",
    "bytes_tensor",
    "dumps",
    "grpc_infer",
    "grpc_patched",
    "half_sent",
    "http_infer",
    "http_raw",
]

# A stub's death, as the backend logs it (StubSupervisor::Reap, Restart).
DEATH = re.compile(r"tritonpy: stub for .*\(pid \d+\) (died|was killed)[^\n]*")


@dataclass
class Answer:
    """What the server answered: ``ok`` with the decoded JSON or protobuf
    (``body``), or an error ``message`` (``status``: the HTTP status, the
    gRPC code's name, or 0 when the connection closed without an answer)."""

    ok: bool
    status: int | str
    message: str = ""
    body: Any = None

    def output(self, name: str) -> Any:
        """The JSON ``data`` of output ``name`` of an HTTP answer."""
        for out in self.body["outputs"]:
            if out["name"] == name:
                return out["data"]
        raise KeyError(name)


def dumps(obj: Any) -> bytes:
    """JSON text of ``obj``, where a ``bytes`` value (or dict key) is
    written as a string of exactly those bytes, valid UTF-8 or not (only
    '"' and '\\' escaped): the one way to put any byte in a request id,
    a parameter or a tensor name."""
    if isinstance(obj, bytes):
        return b'"' + obj.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
    if isinstance(obj, dict):
        items = (dumps(k) + b":" + dumps(v) for k, v in obj.items())
        return b"{" + b",".join(items) + b"}"
    if isinstance(obj, (list, tuple)):
        return b"[" + b",".join(dumps(v) for v in obj) + b"]"
    return json.dumps(obj).encode()


def bytes_tensor(items: Sequence[bytes]) -> bytes:
    """Triton's BYTES serialization: each element as a u32 length, then it."""
    return b"".join(struct.pack("<I", len(b)) + b for b in items)


def http_raw(
    srv: TritonServer, path: str, body: bytes, headers: dict[str, str], timeout: float = 60
) -> Answer:
    """POSTs ``body`` to ``path`` with exactly ``headers`` (and the
    Content-Length of the body, unless ``headers`` sets one)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=timeout)
    try:
        conn.putrequest("POST", path, skip_accept_encoding=True)
        if "Content-Length" not in headers:
            conn.putheader("Content-Length", str(len(body)))
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        r = conn.getresponse()
        data = r.read()
    except (OSError, http.client.HTTPException) as e:
        return Answer(False, 0, f"no answer: {e!r}")
    finally:
        conn.close()
    return _http_answer(r.status, r.getheader("Inference-Header-Content-Length"), data)


def _http_answer(status: int, header_len: str | None, data: bytes) -> Answer:
    text = data[: int(header_len)] if header_len else data
    try:
        # An id or a name that is not UTF-8 comes back as it was sent.
        body = json.loads(text.decode("utf-8", "surrogateescape"))
    except ValueError:
        body = None
    if status == 200:
        return Answer(True, status, body=body)
    message = body.get("error", "") if isinstance(body, dict) else data.decode(errors="replace")
    return Answer(False, status, str(message), body)


def http_infer(
    srv: TritonServer,
    model: str,
    header: dict[Any, Any] | bytes,
    binary: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 60,
) -> Answer:
    """An inference request to ``model``: the JSON ``header`` (an object
    written by `dumps`, or its bytes) followed by ``binary`` tensor data
    (with the Inference-Header-Content-Length header, even when empty)."""
    text = header if isinstance(header, bytes) else dumps(header)
    h = {"Content-Type": "application/octet-stream", **(headers or {})}
    if binary is not None:
        h["Inference-Header-Content-Length"] = str(len(text))
    return http_raw(srv, f"/v2/models/{model}/infer", text + (binary or b""), h, timeout)


def _grpc_answer(call: Any) -> Answer:
    try:
        reply = call()
    except grpc.RpcError as e:
        return Answer(False, e.code().name, e.details() or "")
    return Answer(True, "OK", body=reply)


def grpc_infer(srv: TritonServer, request: bytes, timeout: float = 60) -> Answer:
    """Sends a serialized ModelInferRequest as it is (``request`` may be a
    patched serialization that protobuf itself would refuse to make)."""
    with grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
        infer = channel.unary_unary(
            "/inference.GRPCInferenceService/ModelInfer",
            request_serializer=None,
            response_deserializer=service_pb2.ModelInferResponse.FromString,
        )
        return _grpc_answer(lambda: infer(request, timeout=timeout))


def grpc_patched(
    srv: TritonServer,
    request: service_pb2.ModelInferRequest,
    patch: dict[bytes, bytes] | None = None,
) -> Answer:
    """``request`` serialized, each key of ``patch`` (a placeholder the
    request holds in a string field) replaced by its value of the same
    length, then sent: how an id or a name that is not UTF-8 gets in."""
    data = request.SerializeToString()
    for old, new in (patch or {}).items():
        assert len(old) == len(new) and data.count(old) == 1, (old, new)
        data = data.replace(old, new)
    return grpc_infer(srv, data)


class StubWatch:
    """The stubs of ``srv``: their pids (``srv.stubs()``) and the deaths in
    its log from where the watch started. ``deaths()`` lists every stub
    that died or was killed since, and every pid that is gone."""

    def __init__(self, srv: TritonServer) -> None:
        self.srv = srv
        self.pids = set(srv.stubs())
        self.log_at = srv.log_size()

    def deaths(self) -> list[str]:
        tail = self.srv.log()[self.log_at :]
        lines = [m.group(0) for m in DEATH.finditer(tail)]
        gone = self.pids - set(self.srv.stubs())
        return lines + [f"stub pid {p} is gone" for p in sorted(gone)]


def half_sent(srv: TritonServer, model: str, body: bytes, sent: int) -> Answer:
    """Sends the headers of an inference request of ``body`` and only its
    first ``sent`` bytes, then shuts the sending side: a truncated body.
    Returns whatever the server answers before it closes."""
    with socket.create_connection(("127.0.0.1", srv.http_port), timeout=60) as s:
        head = (
            f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        s.sendall(head.encode() + body[:sent])
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    if not data:
        return Answer(False, 0, "closed without an answer")
    status = int(data.split(b" ", 2)[1])
    return _http_answer(status, None, data.split(b"\r\n\r\n", 1)[-1])
