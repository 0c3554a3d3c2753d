# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Reference codec of the tritonpy IPC protocol (docs/protocol.md), in plain
Python with ``struct``.

It shares no code with either real codec (C++ in backend/, Cython in stub/):
it writes the golden frames both are tested against, and the stub tests use it
to play the backend's side of the socket.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

# The constants come from docs/protocol.toml, as the real codecs' do; the
# code below shares nothing else with them.
# BEGIN generated (constants) from docs/protocol.toml by tools/gen_wire.py (make wire): do not edit
MAGIC = 0x31595054
VERSION = 1
HEADER_SIZE = 24
MAX_FRAME = 131072
ARENA_REF_SIZE = 16
PAD_ALIGN = 8
INLINE_LIMIT = 65536
MAX_NDIM = 64
MAX_COUNT = 1048576
MAX_BACKEND_TEXT = 32768
TRUNCATED_START = "... [truncated, "
TRUNCATED_END = " bytes]"
FLAG_BODY_IN_ARENA = 1
FLAG_BATCH_DONE = 2
HELLO = 1
INIT = 2
INIT_DONE = 3
ARENA = 4
EXECUTE = 5
RESPONSES = 6
EXECUTE_DONE = 7
LOG = 8
FINALIZE = 9
FINALIZE_DONE = 10
ERROR = 11
RELEASE = 12
CANCEL = 13
SEND_ERROR = 14
IS_READY = 15
READY = 16
DRAIN = 17
BLS_REQUEST = 18
BLS_RESPONSE = 19
BLS_CANCEL = 20
BLS_ARENA = 21
BLS_RELEASE = 22
MODEL_CONTROL = 23
MODEL_CONTROL_DONE = 24
METRIC = 25
METRIC_DONE = 26
AUTO_COMPLETE = 27
AUTO_COMPLETE_DONE = 28
LOG_LEVELS = 29
BLS_CHANNEL = 30
MAX_FRAME_TYPE = 30
RESP_FINAL = 0x1
RESP_BATCH_END = 0x20000000
RESP_RESCHEDULE = 0x40000000
RESP_NO_RESPONSE = 0x80000000
RESP_KNOWN = 0xE0000001
LOC_INLINE = 0
LOC_ARENA = 1
LOC_RECEIVER_ARENA = 2
OP_FAMILY_NEW = 1
OP_FAMILY_DELETE = 2
OP_METRIC_NEW = 3
OP_METRIC_DELETE = 4
OP_INCREMENT = 5
OP_SET = 6
OP_OBSERVE = 7
OP_VALUE = 8
METRIC_COUNTER = 0
METRIC_GAUGE = 1
METRIC_HISTOGRAM = 2
MAX_METRIC_KIND = 2
LOG_INFO = 0
LOG_WARN = 1
LOG_ERROR = 2
LOG_VERBOSE = 3
LOG_LEVELS_ALL = 0xF
JSON_TYPES = {
    HELLO,
    INIT,
    INIT_DONE,
    FINALIZE_DONE,
    MODEL_CONTROL,
    MODEL_CONTROL_DONE,
    AUTO_COMPLETE,
    AUTO_COMPLETE_DONE,
}
HEADER_FORMAT = "<IBBHQII"  # magic, version, type, flags, id, body_len, reserved
TYPE_NAMES = {
    HELLO: "HELLO",
    INIT: "INIT",
    INIT_DONE: "INIT_DONE",
    ARENA: "ARENA",
    EXECUTE: "EXECUTE",
    RESPONSES: "RESPONSES",
    EXECUTE_DONE: "EXECUTE_DONE",
    LOG: "LOG",
    FINALIZE: "FINALIZE",
    FINALIZE_DONE: "FINALIZE_DONE",
    ERROR: "ERROR",
    RELEASE: "RELEASE",
    CANCEL: "CANCEL",
    SEND_ERROR: "SEND_ERROR",
    IS_READY: "IS_READY",
    READY: "READY",
    DRAIN: "DRAIN",
    BLS_REQUEST: "BLS_REQUEST",
    BLS_RESPONSE: "BLS_RESPONSE",
    BLS_CANCEL: "BLS_CANCEL",
    BLS_ARENA: "BLS_ARENA",
    BLS_RELEASE: "BLS_RELEASE",
    MODEL_CONTROL: "MODEL_CONTROL",
    MODEL_CONTROL_DONE: "MODEL_CONTROL_DONE",
    METRIC: "METRIC",
    METRIC_DONE: "METRIC_DONE",
    AUTO_COMPLETE: "AUTO_COMPLETE",
    AUTO_COMPLETE_DONE: "AUTO_COMPLETE_DONE",
    LOG_LEVELS: "LOG_LEVELS",
    BLS_CHANNEL: "BLS_CHANNEL",
}
# END generated (constants)
HEADER = struct.Struct(HEADER_FORMAT)
assert HEADER.size == HEADER_SIZE
RESP_ALL = RESP_KNOWN
TYPE_VALUES = {v: k for k, v in TYPE_NAMES.items()}


class ProtocolError(ValueError):
    pass


@dataclass
class Tensor:
    name: str
    dtype: int
    dims: list[int]
    byte_size: int
    location: int = 0
    data: bytes = b""
    arena_id: int = 0
    offset: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "dtype": self.dtype,
            "dims": list(self.dims),
            "byte_size": self.byte_size,
            "location": self.location,
        }
        if self.location == 0:
            out["data_hex"] = self.data.hex()
        else:
            out["arena_id"] = self.arena_id
            out["offset"] = self.offset
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Tensor:
        return cls(
            d["name"],
            d["dtype"],
            list(d["dims"]),
            d["byte_size"],
            d["location"],
            bytes.fromhex(d.get("data_hex", "")),
            d.get("arena_id", 0),
            d.get("offset", 0),
        )


# ---------------------------------------------------------------- writer


class _W:
    def __init__(self) -> None:
        self.b = bytearray(HEADER_SIZE)  # body offsets count from frame start

    def u8(self, v: int) -> None:
        self.b += struct.pack("<B", v)

    def u32(self, v: int) -> None:
        self.b += struct.pack("<I", v)

    def u64(self, v: int) -> None:
        self.b += struct.pack("<Q", v)

    def i64(self, v: int) -> None:
        self.b += struct.pack("<q", v)

    def f64(self, v: float) -> None:
        self.b += struct.pack("<d", v)

    def str(self, s: str | bytes) -> None:
        raw = s.encode() if isinstance(s, str) else s
        self.u32(len(raw))
        self.b += raw

    def pad8(self) -> None:
        self.b += b"\0" * (-len(self.b) % PAD_ALIGN)

    def tensor(self, t: Tensor) -> None:
        self.str(t.name)
        self.u32(t.dtype)
        self.u32(len(t.dims))
        for d in t.dims:
            self.i64(d)
        self.u64(t.byte_size)
        self.u8(t.location)
        if t.location == 0:
            assert len(t.data) == t.byte_size
            self.pad8()
            self.b += t.data
        else:
            self.u32(t.arena_id)
            self.u32(0)
            self.u64(t.offset)


def encode(ftype: int, body: dict[str, Any], *, id: int = 0, flags: int = 0) -> bytes:
    """Encode one frame from the decoded form that :func:`decode` returns."""
    w = _W()
    if flags & FLAG_BODY_IN_ARENA:
        w.u32(body["arena_id"])
        w.u32(0)
        w.u64(body["offset"])
        body_len = body["body_len"]
    else:
        _encode_body(w, ftype, body)
        body_len = len(w.b) - HEADER_SIZE
    w.b[:HEADER_SIZE] = HEADER.pack(MAGIC, VERSION, ftype, flags, id, body_len, 0)
    return bytes(w.b)


def _encode_body(w: _W, ftype: int, body: dict[str, Any]) -> None:
    if ftype in JSON_TYPES:
        w.b += json.dumps(body["json"], separators=(",", ":"), sort_keys=True).encode()
    elif ftype in (FINALIZE, IS_READY, DRAIN, BLS_CANCEL, BLS_CHANNEL):
        pass
    elif ftype == BLS_REQUEST:
        w.str(body["model_name"])
        w.i64(body["model_version"])
        w.u64(body["trace_batch_id"])
        w.u32(body["trace_request_index"])
        _encode_request(w, body["request"])
    elif ftype == BLS_RESPONSE:
        _encode_response(w, body)
    elif ftype == METRIC:
        w.u32(len(body["ops"]))
        for op in body["ops"]:
            _encode_metric_op(w, op)
    elif ftype == METRIC_DONE:
        w.u8(body["ok"])
        w.str(body["error"])
        w.f64(body["value"])
    elif ftype == CANCEL:
        w.u32(len(body["requests"]))
        for c in body["requests"]:
            w.u64(c["batch_id"])
            w.u32(c["request_index"])
            w.u32(0)
    elif ftype == SEND_ERROR:
        w.u64(body["batch_id"])
        w.u32(body["request_index"])
        w.u32(body["error_code"])
        w.str(body["message"])
    elif ftype == READY:
        w.u8(body["ready"])
        w.str(body["message"])
    elif ftype == LOG_LEVELS:
        w.u32(body["enabled"])
    elif ftype in (ARENA, BLS_ARENA):
        w.u32(body["arena_id"])
        w.u32(0)
        w.u64(body["size"])
    elif ftype == EXECUTE:
        w.u32(len(body["requests"]))
        for r in body["requests"]:
            _encode_request(w, r)
    elif ftype == RESPONSES:
        w.u32(len(body["responses"]))
        for r in body["responses"]:
            w.u64(r["batch_id"])
            w.u32(r["request_index"])
            _encode_response(w, r)
    elif ftype == EXECUTE_DONE:
        w.u8(body["ok"])
        w.str(body["error"])
    elif ftype == LOG:
        w.u32(body["level"])
        w.str(body["file"])
        w.u32(body["line"])
        w.str(body["message"])
    elif ftype == ERROR:
        w.str(body["message"])
    elif ftype in (RELEASE, BLS_RELEASE):
        w.u32(len(body["allocations"]))
        for a in body["allocations"]:
            w.u32(a["arena_id"])
            w.u32(0)
            w.u64(a["offset"])
    else:
        raise ProtocolError(f"unknown frame type {ftype}")


def _encode_response(w: _W, r: dict[str, Any]) -> None:
    """The response of a RESPONSES entry and of a BLS_RESPONSE body."""
    w.u32(r["response_flags"])
    w.u8(r["has_error"])
    w.u32(r["error_code"])
    w.str(r["error_message"])
    w.str(r["parameters"])
    w.u32(len(r["outputs"]))
    for t in r["outputs"]:
        w.tensor(Tensor.from_json(t) if isinstance(t, dict) else t)


def _encode_metric_op(w: _W, op: dict[str, Any]) -> None:
    code = op["op"]
    w.u8(code)
    if code == OP_FAMILY_NEW:
        w.u32(op["family"])
        w.u32(op["kind"])
        w.str(op["name"])
        w.str(op["description"])
    elif code == OP_FAMILY_DELETE:
        w.u32(op["family"])
    elif code == OP_METRIC_NEW:
        w.u32(op["metric"])
        w.u32(op["family"])
        w.u32(len(op["labels"]))
        for key, value in op["labels"]:
            w.str(key)
            w.str(value)
        w.u32(len(op["buckets"]))
        for b in op["buckets"]:
            w.f64(b)
    elif code in (OP_METRIC_DELETE, OP_VALUE):
        w.u32(op["metric"])
    elif code in (OP_INCREMENT, OP_SET):
        w.u32(op["metric"])
        w.f64(op["value"])
    elif code == OP_OBSERVE:
        w.u32(op["metric"])
        w.u32(len(op["values"]))
        for v in op["values"]:
            w.f64(v)
    else:
        raise ProtocolError(f"unknown metric op {code}")


def _encode_request(w: _W, r: dict[str, Any]) -> None:
    w.str(r["request_id"])
    w.u8(r["correlation_kind"])
    w.u64(r["correlation_u64"])
    w.str(r["correlation_str"])
    w.u32(r["flags"])
    w.u64(r["timeout_us"])
    w.str(r["parameters"])
    w.u32(len(r["requested_outputs"]))
    for n in r["requested_outputs"]:
        w.str(n)
    w.u32(len(r["inputs"]))
    for t in r["inputs"]:
        w.tensor(Tensor.from_json(t) if isinstance(t, dict) else t)
    w.str(r["trace_context"])


# ---------------------------------------------------------------- reader


class _R:
    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise ProtocolError(
                f"truncated: need {n} bytes at {self.pos}, frame ends at {self.end}"
            )
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return int(struct.unpack("<I", self.take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack("<Q", self.take(8))[0])

    def i64(self) -> int:
        return int(struct.unpack("<q", self.take(8))[0])

    def f64(self) -> float:
        return float(struct.unpack("<d", self.take(8))[0])

    def text(self) -> str:
        # Text is data: bytes that are not UTF-8 become U+FFFD.
        return self.take(self.u32()).decode("utf-8", "replace")

    def zero32(self) -> None:
        if self.u32() != 0:
            raise ProtocolError("reserved field is not zero")

    def pad8(self) -> None:
        n = -self.pos % PAD_ALIGN
        if any(self.take(n)):
            raise ProtocolError("padding is not zero")

    def tensor(self, receiver_arena_ok: bool = False) -> dict[str, Any]:
        """A tensor; location 2 (receiver's arena) only where the caller
        allows it (RESPONSES outputs)."""
        name = self.text()
        dtype = self.u32()
        if not 1 <= dtype <= 14:
            raise ProtocolError(f"tensor '{name}': bad dtype {dtype}")
        ndim = self.u32()
        if ndim > MAX_NDIM:
            raise ProtocolError(f"tensor '{name}': ndim {ndim} > {MAX_NDIM}")
        dims = [self.i64() for _ in range(ndim)]
        if any(d < 0 for d in dims):
            raise ProtocolError(f"tensor '{name}': negative dimension")
        byte_size = self.u64()
        location = self.u8()
        t = Tensor(name, dtype, dims, byte_size, location)
        if location == 0:
            self.pad8()
            t.data = self.take(byte_size)
        elif location == 1 or (location == 2 and receiver_arena_ok):
            t.arena_id = self.u32()
            self.zero32()
            t.offset = self.u64()
        else:
            raise ProtocolError(f"tensor '{name}': bad location {location}")
        return t.to_json()

    def done(self) -> None:
        if self.pos != self.end:
            raise ProtocolError(f"{self.end - self.pos} trailing bytes")


def decode_header(buf: bytes) -> tuple[int, int, int, int]:
    if len(buf) < HEADER_SIZE:
        raise ProtocolError("shorter than the header")
    if len(buf) > MAX_FRAME:
        raise ProtocolError("longer than MAX_FRAME")
    magic, version, ftype, flags, fid, body_len, reserved = HEADER.unpack_from(buf)
    if magic != MAGIC or version != VERSION or reserved != 0:
        raise ProtocolError("bad magic, version or reserved header field")
    if ftype not in TYPE_NAMES:
        raise ProtocolError(f"unknown frame type {ftype}")
    allowed = FLAG_BODY_IN_ARENA | (FLAG_BATCH_DONE if ftype == RESPONSES else 0)
    if flags & ~allowed:
        raise ProtocolError(f"unknown flags {flags:#x}")
    if flags & FLAG_BODY_IN_ARENA:
        if len(buf) != HEADER_SIZE + ARENA_REF_SIZE:
            raise ProtocolError("BODY_IN_ARENA frame must carry exactly an arena reference")
    elif body_len != len(buf) - HEADER_SIZE:
        raise ProtocolError("body_len does not match the message length")
    return ftype, flags, fid, body_len


def decode(buf: bytes) -> dict[str, Any]:
    """Decode one whole frame to ``{"type", "id", "flags", "body"}``.

    A BODY_IN_ARENA frame decodes to its reference
    (``{"arena_id", "offset", "body_len"}``); decode the body itself with
    :func:`decode_body` once read from the arena."""
    ftype, flags, fid, body_len = decode_header(buf)
    if flags & FLAG_BODY_IN_ARENA:
        r = _R(buf, HEADER_SIZE, len(buf))
        aid = r.u32()
        r.zero32()
        body = {"arena_id": aid, "offset": r.u64(), "body_len": body_len}
    else:
        body = decode_body(ftype, buf, HEADER_SIZE)
    return {"type": TYPE_NAMES[ftype], "id": fid, "flags": flags, "body": body}


def decode_body(ftype: int, buf: bytes, start: int) -> dict[str, Any]:
    r = _R(buf, start, len(buf))
    body: dict[str, Any]
    if ftype in JSON_TYPES:
        obj = json.loads(r.take(r.end - r.pos).decode("utf-8", "replace"))
        if not isinstance(obj, dict):
            raise ProtocolError("JSON body is not an object")
        body = {"json": obj}
    elif ftype in (FINALIZE, IS_READY, DRAIN, BLS_CANCEL, BLS_CHANNEL):
        body = {}
    elif ftype == BLS_REQUEST:
        body = {
            "model_name": r.text(),
            "model_version": r.i64(),
            "trace_batch_id": r.u64(),
            "trace_request_index": r.u32(),
            "request": _decode_request(r),
        }
    elif ftype == BLS_RESPONSE:
        body = _decode_response(r, RESP_FINAL, "unknown BLS response flags")
    elif ftype == METRIC:
        body = {"ops": [_decode_metric_op(r) for _ in range(r.u32())]}
    elif ftype == METRIC_DONE:
        body = {"ok": r.u8(), "error": r.text(), "value": r.f64()}
    elif ftype == CANCEL:
        cancels = []
        for _ in range(r.u32()):
            bid = r.u64()
            idx = r.u32()
            r.zero32()
            cancels.append({"batch_id": bid, "request_index": idx})
        body = {"requests": cancels}
    elif ftype == SEND_ERROR:
        body = {
            "batch_id": r.u64(),
            "request_index": r.u32(),
            "error_code": r.u32(),
            "message": r.text(),
        }
    elif ftype == READY:
        body = {"ready": r.u8(), "message": r.text()}
    elif ftype == LOG_LEVELS:
        body = {"enabled": r.u32()}
        if body["enabled"] & ~LOG_LEVELS_ALL:
            raise ProtocolError("unknown log level bits")
    elif ftype in (ARENA, BLS_ARENA):
        aid = r.u32()
        r.zero32()
        body = {"arena_id": aid, "size": r.u64()}
    elif ftype == EXECUTE:
        body = {"requests": [_decode_request(r) for _ in range(r.u32())]}
    elif ftype == RESPONSES:
        resps = []
        for _ in range(r.u32()):
            resp: dict[str, Any] = {"batch_id": r.u64(), "request_index": r.u32()}
            resp.update(_decode_response(r, RESP_ALL, "unknown response flags", True))
            resps.append(resp)
        body = {"responses": resps}
    elif ftype == EXECUTE_DONE:
        body = {"ok": r.u8(), "error": r.text()}
    elif ftype == LOG:
        body = {"level": r.u32(), "file": r.text(), "line": r.u32(), "message": r.text()}
    elif ftype == ERROR:
        body = {"message": r.text()}
    elif ftype in (RELEASE, BLS_RELEASE):
        allocs = []
        for _ in range(r.u32()):
            aid = r.u32()
            r.zero32()
            allocs.append({"arena_id": aid, "offset": r.u64()})
        body = {"allocations": allocs}
    else:
        raise ProtocolError(f"unknown frame type {ftype}")
    r.done()
    return body


def _decode_response(
    r: _R, flags: int, unknown_flags: str, receiver_arena_ok: bool = False
) -> dict[str, Any]:
    """The response of a RESPONSES entry (``receiver_arena_ok``: its
    outputs may be in the receiver's arena) and of a BLS_RESPONSE body;
    ``flags`` are the response flags it may carry."""
    resp: dict[str, Any] = {
        "response_flags": r.u32(),
        "has_error": r.u8(),
        "error_code": r.u32(),
        "error_message": r.text(),
        "parameters": r.text(),
    }
    if resp["response_flags"] & ~flags:
        raise ProtocolError(unknown_flags)
    resp["outputs"] = [r.tensor(receiver_arena_ok=receiver_arena_ok) for _ in range(r.u32())]
    return resp


def _decode_metric_op(r: _R) -> dict[str, Any]:
    code = r.u8()
    op: dict[str, Any] = {"op": code}
    if code == OP_FAMILY_NEW:
        op.update(family=r.u32(), kind=r.u32(), name=r.text(), description=r.text())
        if op["kind"] > 2:
            raise ProtocolError(f"unknown metric kind {op['kind']}")
    elif code == OP_FAMILY_DELETE:
        op["family"] = r.u32()
    elif code == OP_METRIC_NEW:
        op.update(metric=r.u32(), family=r.u32())
        op["labels"] = [[r.text(), r.text()] for _ in range(r.u32())]
        op["buckets"] = [r.f64() for _ in range(r.u32())]
    elif code in (OP_METRIC_DELETE, OP_VALUE):
        op["metric"] = r.u32()
    elif code in (OP_INCREMENT, OP_SET):
        op.update(metric=r.u32(), value=r.f64())
    elif code == OP_OBSERVE:
        op["metric"] = r.u32()
        op["values"] = [r.f64() for _ in range(r.u32())]
    else:
        raise ProtocolError(f"unknown metric op {code}")
    return op


def _decode_request(r: _R) -> dict[str, Any]:
    req: dict[str, Any] = {"request_id": r.text(), "correlation_kind": r.u8()}
    if req["correlation_kind"] > 2:
        raise ProtocolError("bad correlation kind")
    req["correlation_u64"] = r.u64()
    req["correlation_str"] = r.text()
    req["flags"] = r.u32()
    req["timeout_us"] = r.u64()
    req["parameters"] = r.text()
    req["requested_outputs"] = [r.text() for _ in range(r.u32())]
    req["inputs"] = [r.tensor() for _ in range(r.u32())]
    req["trace_context"] = r.text()
    return req


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` UTF-8 bytes, the marker included, on a
    character boundary; whole when it fits."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    marker = f"{TRUNCATED_START}{len(raw)}{TRUNCATED_END}"
    keep = max(limit - len(marker.encode()), 0)
    while 0 < keep < len(raw) and raw[keep] & 0xC0 == 0x80:
        keep -= 1
    return raw[:keep].decode() + marker


def inline(name: str, dtype: int, dims: list[int], data: bytes) -> dict[str, Any]:
    return Tensor(name, dtype, dims, len(data), 0, data).to_json()


def request(
    request_id: str = "", inputs: list[dict[str, Any]] | None = None, **kw: Any
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "request_id": request_id,
        "correlation_kind": 0,
        "correlation_u64": 0,
        "correlation_str": "",
        "flags": 0,
        "timeout_us": 0,
        "parameters": "",
        "requested_outputs": [],
        "inputs": inputs or [],
        "trace_context": "",
    }
    r.update(kw)
    return r


@dataclass
class Golden:
    file: str
    frame: bytes
    expect: dict[str, Any] | None = None  # None: the frame is invalid
    why: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
