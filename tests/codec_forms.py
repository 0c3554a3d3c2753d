# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub's Cython codec and the backend's C++ codec, driven in the
decoded form of tests/protocol_ref.py: tests/unit/test_golden.py holds them
to the golden frames, tests/unit/test_wire_drift.py to docs/protocol.toml."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tritonpy.stub import _codec as C

import protocol_ref as P

ROOT = Path(__file__).resolve().parents[1]
# The frame types the stub sends, which its codec encodes.
STUB_SENT_TYPES = (
    "HELLO",
    "INIT_DONE",
    "ARENA",
    "RESPONSES",
    "EXECUTE_DONE",
    "LOG",
    "FINALIZE_DONE",
    "ERROR",
    "RELEASE",
    "READY",
    "BLS_REQUEST",
    "BLS_CANCEL",
    "BLS_RELEASE",
    "MODEL_CONTROL",
    "METRIC",
)


def _tensor(buf: bytes, t: C.WireTensor) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": t.name,
        "dtype": t.dtype,
        "dims": list(t.dims),
        "byte_size": t.byte_size,
        "location": t.location,
    }
    if t.location == C.LOC_INLINE:
        assert (t.arena_id, t.arena_offset) == (0, 0)
        d["data_hex"] = bytes(buf[t.offset : t.offset + t.byte_size]).hex()
    else:
        assert t.offset == 0
        d["arena_id"], d["offset"] = t.arena_id, t.arena_offset
    return d


def _request(buf: bytes, q: C.WireRequest) -> dict[str, Any]:
    corr = q.correlation_id
    kind = 0 if corr is None else (1 if isinstance(corr, int) else 2)
    return {
        "request_id": q.request_id,
        "correlation_kind": kind,
        "correlation_u64": corr if kind == 1 else 0,
        "correlation_str": corr if kind == 2 else "",
        "flags": q.flags,
        "timeout_us": q.timeout_us,
        "parameters": q.parameters,
        "requested_outputs": list(q.requested_output_names),
        "inputs": [_tensor(buf, t) for t in q.inputs],
        "trace_context": q.trace_context,
    }


def _response(buf: bytes, r: C.WireResponse) -> dict[str, Any]:
    return {
        "response_flags": r.flags,
        "has_error": int(r.has_error),
        "error_code": r.error_code,
        "error_message": r.error_message,
        "parameters": r.parameters,
        "outputs": [_tensor(buf, t) for t in r.outputs],
    }


def cython_decode(buf: bytes) -> dict[str, Any]:
    ftype, flags, fid, body_len = C.decode_header(buf)
    name = P.TYPE_NAMES[ftype]
    if flags & C.FLAG_BODY_IN_ARENA:
        aid, off = C.decode_arena_ref(buf)
        return {
            "type": name,
            "id": fid,
            "flags": flags,
            "body": {"arena_id": aid, "offset": off, "body_len": body_len},
        }
    body = C.decode_body(ftype, buf)
    out: dict[str, Any]
    if ftype in P.JSON_TYPES:
        out = {"json": body}
    elif ftype == C.FINALIZE:
        out = {}
    elif ftype == C.ARENA:
        out = {"arena_id": body[0], "size": body[1]}
    elif ftype == C.EXECUTE:
        out = {"requests": [_request(buf, q) for q in body]}
    elif ftype == C.BLS_REQUEST:
        out = {
            "model_name": body.model_name,
            "model_version": body.model_version,
            "trace_batch_id": body.trace_batch_id,
            "trace_request_index": body.trace_request_index,
            "request": _request(buf, body.request),
        }
    elif ftype == C.BLS_RESPONSE:
        assert (body.batch_id, body.request_index) == (0, 0)
        out = _response(buf, body)
    elif ftype == C.BLS_CANCEL:
        out = {}
    elif ftype == C.BLS_ARENA:
        out = {"arena_id": body[0], "size": body[1]}
    elif ftype == C.BLS_RELEASE:
        out = {"allocations": [{"arena_id": a, "offset": o} for a, o in body]}
    elif ftype == C.RESPONSES:
        out = {
            "responses": [
                {"batch_id": r.batch_id, "request_index": r.request_index, **_response(buf, r)}
                for r in body
            ]
        }
    elif ftype in (C.IS_READY, C.DRAIN, C.BLS_CHANNEL):
        out = {}
    elif ftype == C.CANCEL:
        out = {"requests": [{"batch_id": b, "request_index": i} for b, i in body]}
    elif ftype == C.SEND_ERROR:
        out = dict(zip(("batch_id", "request_index", "error_code", "message"), body, strict=True))
    elif ftype == C.READY:
        out = {"ready": body[0], "message": body[1]}
    elif ftype == C.LOG_LEVELS:
        out = {"enabled": body}
    elif ftype == C.EXECUTE_DONE:
        out = {"ok": body[0], "error": body[1]}
    elif ftype == C.LOG:
        out = dict(zip(("level", "file", "line", "message"), body, strict=True))
    elif ftype == C.ERROR:
        out = {"message": body}
    elif ftype == C.RELEASE:
        out = {"allocations": [{"arena_id": a, "offset": o} for a, o in body]}
    elif ftype == C.METRIC:
        out = {"ops": [_metric_op_json(op) for op in body]}
    elif ftype == C.METRIC_DONE:
        out = {"ok": body[0], "error": body[1], "value": body[2]}
    return {"type": name, "id": fid, "flags": flags, "body": out}


# A MetricOp's fields when its code does not carry them.
_METRIC_EMPTY = {
    "family": 0,
    "metric": 0,
    "kind": 0,
    "name": "",
    "description": "",
    "labels": (),
    "values": (),
    "value": 0.0,
}
_METRIC_FIELDS = {
    C.OP_FAMILY_NEW: ("family", "kind", "name", "description"),
    C.OP_FAMILY_DELETE: ("family",),
    C.OP_METRIC_NEW: ("metric", "family", "labels", "buckets"),
    C.OP_METRIC_DELETE: ("metric",),
    C.OP_INCREMENT: ("metric", "value"),
    C.OP_SET: ("metric", "value"),
    C.OP_OBSERVE: ("metric", "values"),
    C.OP_VALUE: ("metric",),
}


def _metric_op_json(op: C.MetricOp) -> dict[str, Any]:
    """The reference's form of ``op``: the fields its code carries (the
    others are zero or empty), ``values`` named ``buckets`` in METRIC_NEW."""
    out: dict[str, Any] = {"op": op.op}
    for key in _METRIC_FIELDS[op.op]:
        value = getattr(op, "values" if key == "buckets" else key)
        if key == "labels":
            value = [list(pair) for pair in value]
        elif key in ("buckets", "values"):
            value = list(value)
        out[key] = value
    carried = {"values" if k == "buckets" else k for k in _METRIC_FIELDS[op.op]}
    for key, empty in _METRIC_EMPTY.items():
        if key not in carried:
            assert getattr(op, key) == empty, (op.op, key)
    return out


def _metric_op_tuple(op: dict[str, Any]) -> tuple:
    values = [op[key] for key in _METRIC_FIELDS[op["op"]]]
    if op["op"] == C.OP_METRIC_NEW:
        values[2] = [tuple(pair) for pair in values[2]]
    return (op["op"], *values)


def encode_with_writer(entry: dict[str, Any]) -> bytes:
    ftype = P.TYPE_VALUES[entry["type"]]
    body = entry["body"]
    if ftype == C.RESPONSES:
        w = C.FrameWriter()
        w.begin(ftype, entry["id"], entry["flags"])
        w.u32(len(body["responses"]))
        for r in body["responses"]:
            w.u64(r["batch_id"])
            w.u32(r["request_index"])
            w.u32(r["response_flags"])
            w.u8(r["has_error"])
            w.u32(r["error_code"])
            w.string(r["error_message"])
            w.string(r["parameters"])
            w.u32(len(r["outputs"]))
            for t in r["outputs"]:
                if t["location"] == 0:
                    w.tensor_inline(
                        t["name"], t["dtype"], tuple(t["dims"]), bytes.fromhex(t["data_hex"])
                    )
                else:
                    w.tensor_arena(
                        t["name"],
                        t["dtype"],
                        tuple(t["dims"]),
                        t["byte_size"],
                        t["arena_id"],
                        t["offset"],
                        t["location"],
                    )
        return w.finish()
    if ftype == C.ARENA:
        return C.encode_simple(ftype, (body["arena_id"], body["size"]), entry["id"])
    if ftype == C.EXECUTE_DONE:
        return C.encode_simple(ftype, (body["ok"], body["error"]), entry["id"])
    if ftype == C.LOG:
        return C.encode_simple(ftype, (body["level"], body["file"], body["line"], body["message"]))
    if ftype == C.ERROR:
        return C.encode_simple(ftype, body["message"])
    if ftype == C.READY:
        return C.encode_simple(ftype, (body["ready"], body["message"]), entry["id"])
    if ftype in (C.RELEASE, C.BLS_RELEASE):
        return C.encode_simple(ftype, [(a["arena_id"], a["offset"]) for a in body["allocations"]])
    if ftype == C.BLS_CANCEL:
        return C.encode_simple(ftype, None, entry["id"])
    if ftype == C.METRIC:
        from tritonpy.stub.metrics import encode_metric

        frames = encode_metric([_metric_op_tuple(op) for op in body["ops"]], entry["id"])
        assert len(frames) == 1
        return frames[0]
    if ftype == C.MODEL_CONTROL:
        w = C.FrameWriter()
        w.begin(ftype, entry["id"])
        w.json_body(body["json"])
        return w.finish()
    if ftype == C.BLS_REQUEST:
        from tritonpy.stub.bls import encode_bls_request

        q = body["request"]
        corr = (None, q["correlation_u64"], q["correlation_str"])[q["correlation_kind"]]
        ins = []
        for t in q["inputs"]:
            if t["location"] == 0:
                ins.append(
                    (
                        t["name"],
                        t["dtype"],
                        tuple(t["dims"]),
                        bytes.fromhex(t["data_hex"]),
                        0,
                        0,
                        t["byte_size"],
                    )
                )
            else:
                ins.append(
                    (
                        t["name"],
                        t["dtype"],
                        tuple(t["dims"]),
                        None,
                        t["arena_id"],
                        t["offset"],
                        t["byte_size"],
                    )
                )
        return encode_bls_request(
            entry["id"],
            body["model_name"],
            body["model_version"],
            q["request_id"],
            corr,
            q["flags"],
            q["timeout_us"],
            q["parameters"],
            q["requested_outputs"],
            ins,
            trace_batch_id=body["trace_batch_id"],
            trace_request_index=body["trace_request_index"],
        )
    return C.encode_json(ftype, body["json"])


def golden_test_binary() -> Path | None:
    for candidate in (
        os.environ.get("TRITONPY_GOLDEN_TEST"),
        ROOT / "build" / "cmake" / "tritonpy_golden_test",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None
