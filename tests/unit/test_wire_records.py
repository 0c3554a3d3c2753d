# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub's wire records (stub/_codec.pxd): the RESPONSES entries it
makes in stub/_batch.pyx and encodes, with their sizes, in stub/_codec.pyx;
and the read-only records its decoder makes of requests, tensors,
responses and metric operations."""

from __future__ import annotations

import ast
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritonpy import pb_utils as pb
from tritonpy.stub import _batch
from tritonpy.stub import _codec as C

import protocol_ref as P

CODEC_PYI = Path(__file__).resolve().parents[2] / "src" / "tritonpy" / "stub" / "_codec.pyi"
DECODED = (C.WireTensor, C.WireRequest, C.BlsRequest, C.WireResponse, C.MetricOp)
FP32, INT32 = 11, 8


def _batch_of(n: int) -> _batch.Batch:
    batch = _batch.Batch()
    batch.id = 7
    batch.requests = batch.given = [
        _batch.request_from_stub("m", f"r{i}", 0, 0, 0, "", [], [], batch, i) for i in range(n)
    ]
    return batch


def _decode(frame: bytes) -> list:
    ftype, _flags, _fid, _n = C.decode_header(frame)
    assert ftype == C.RESPONSES
    return C.decode_body(ftype, frame)


def test_an_entry_names_its_fields_and_encodes_as_the_protocol_says() -> None:
    batch = _batch_of(2)
    out = pb.Tensor("OUT", np.arange(4, dtype=np.float32))
    resp = pb.InferenceResponse([out], parameters={"k": 1})
    entry = _batch.entry(batch.requests[1], resp, C.RESP_FINAL, 0, None, "m")
    assert (entry.batch_id, entry.index, entry.flags, entry.error) == (7, 1, C.RESP_FINAL, None)
    assert entry.parameters == '{"k": 1}'
    (t,) = entry.outputs
    assert (t.name, t.dtype, t.dims, t.byte_size, t.location) == ("OUT", 11, (4,), 16, C.LOC_INLINE)
    code = int(pb.TritonError("no").code())
    failed = _batch.entry(
        batch.requests[0],
        pb.InferenceResponse(error=pb.TritonError("no")),
        C.RESP_FINAL,
        0,
        None,
        "m",
    )
    assert failed.error == (code, "no") and failed.outputs == ()

    w = C.FrameWriter()
    w.begin(C.RESPONSES)
    w.u32(2)
    w.entry(entry)
    w.entry(failed)
    first, second = _decode(w.finish())
    assert (first.batch_id, first.request_index, first.flags, first.has_error) == (
        7,
        1,
        C.RESP_FINAL,
        False,
    )
    assert first.parameters == '{"k": 1}'
    assert [(t.name, t.dtype, t.dims, t.byte_size, t.location) for t in first.outputs] == [
        ("OUT", 11, (4,), 16, C.LOC_INLINE)
    ]
    assert (second.batch_id, second.request_index, second.flags) == (7, 0, C.RESP_FINAL)
    assert (second.has_error, second.error_code, second.error_message) == (True, code, "no")
    assert (second.parameters, second.outputs) == ("", ())


def test_a_batch_answer_marks_its_last_entry_and_entries_fill_frames() -> None:
    batch = _batch_of(5)
    big = pb.Tensor("OUT", np.zeros(60000 // 4, dtype=np.float32))  # inline: under 64 KiB
    entries = _batch.answer(batch, [pb.InferenceResponse([big])] * 5, None, None, "m")
    assert [e.flags for e in entries] == [C.RESP_FINAL] * 4 + [C.RESP_FINAL | C.RESP_BATCH_END]
    assert batch.open == 0
    w = C.FrameWriter()
    sent, i = [], 0
    while i < len(entries):
        w.begin(C.RESPONSES)
        w.u32(0)
        end = _batch.write_entries(w, entries, i)
        w.patch_u32(C.HEADER_SIZE, end - i)
        frame = w.finish()
        assert len(frame) <= C.MAX_FRAME
        sent.append(len(_decode(frame)))
        i = end
    assert sent == [2, 2, 1]  # two 60 KB entries fit a 128 KiB frame, not three


# ------------------------------------------------------------------ decoded


def _pyi_fields() -> dict[str, list[str]]:
    """The properties _codec.pyi declares for each decoded record."""
    tree = ast.parse(CODEC_PYI.read_text())
    names = {cls.__name__ for cls in DECODED}
    return {
        node.name: [f.name for f in node.body if isinstance(f, ast.FunctionDef)]
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name in names
    }


def test_the_stubs_declare_every_field_of_the_decoded_records() -> None:
    fields = _pyi_fields()
    for cls in DECODED:
        runtime = sorted(k for k, v in vars(cls).items() if type(v).__name__ == "getset_descriptor")
        assert sorted(fields[cls.__name__]) == runtime, cls.__name__


def _execute_frame() -> bytes:
    inline = P.inline("A", INT32, [2], struct.pack("<2i", 7, -7))
    arena = P.Tensor("B", FP32, [256, 1024], 1 << 20, C.LOC_ARENA, b"", 5, 1 << 33).to_json()
    req = P.request(
        "r-1",
        [inline, arena],
        correlation_kind=2,
        correlation_str="seq",
        flags=3,
        timeout_us=1500,
        parameters='{"k":1}',
        requested_outputs=["OUT"],
        trace_context="ctx",
    )
    return P.encode(
        P.EXECUTE,
        {"requests": [req, P.request("r-2", correlation_kind=1, correlation_u64=2**63 + 5)]},
    )


def test_an_execute_frame_decodes_to_named_records() -> None:
    frame = _execute_frame()
    q, q2 = C.decode_body(C.EXECUTE, frame)
    assert isinstance(q, C.WireRequest)
    assert (q.request_id, q.correlation_id, q.flags, q.timeout_us) == ("r-1", "seq", 3, 1500)
    assert (q.parameters, q.requested_output_names, q.trace_context) == ('{"k":1}', ("OUT",), "ctx")
    assert (q2.request_id, q2.correlation_id, q2.inputs) == ("r-2", 2**63 + 5, ())
    a, b = q.inputs
    # Inline: where the bytes lie in the decoded buffer; no arena.
    assert (a.name, a.dtype, a.dims, a.byte_size, a.location) == ("A", INT32, (2,), 8, C.LOC_INLINE)
    assert (a.arena_id, a.arena_offset) == (0, 0)
    assert frame[a.offset : a.offset + a.byte_size] == struct.pack("<2i", 7, -7)
    # In an arena: the arena and the offset in it, nothing in the frame.
    assert (b.name, b.dims, b.byte_size, b.location) == ("B", (256, 1024), 1 << 20, C.LOC_ARENA)
    assert (b.offset, b.arena_id, b.arena_offset) == (0, 5, 1 << 33)


def _records() -> list[Any]:
    """One decoded record of each kind, from frames of every type that has them."""
    (q, _) = C.decode_body(C.EXECUTE, _execute_frame())
    resp = {
        "response_flags": C.RESP_FINAL,
        "has_error": 1,
        "error_code": 3,
        "error_message": "bad",
        "parameters": "",
        "outputs": [],
    }
    bls = P.encode(
        P.BLS_REQUEST,
        {
            "model_name": "m",
            "model_version": -1,
            "trace_batch_id": 0,
            "trace_request_index": 0,
            "request": P.request("x"),
        },
    )
    entry = P.encode(P.RESPONSES, {"responses": [{"batch_id": 9, "request_index": 2, **resp}]})
    metric = P.encode(P.METRIC, {"ops": [{"op": P.OP_INCREMENT, "metric": 3, "value": 2.5}]})
    return [
        q,
        q.inputs[0],
        q.inputs[1],
        C.decode_body(C.BLS_REQUEST, bls),
        C.decode_body(C.BLS_RESPONSE, P.encode(P.BLS_RESPONSE, resp)),
        C.decode_body(C.RESPONSES, entry)[0],
        C.decode_body(C.METRIC, metric)[0],
    ]


@pytest.mark.parametrize("record", _records(), ids=lambda r: type(r).__name__)
def test_decoded_records_are_read_only(record: Any) -> None:
    fields = _pyi_fields()[type(record).__name__]
    assert fields
    for name in fields:
        before = getattr(record, name)
        with pytest.raises(AttributeError):
            setattr(record, name, before)
        with pytest.raises(AttributeError):
            delattr(record, name)
        assert getattr(record, name) == before
    with pytest.raises(AttributeError):
        record.extra = 1  # no __dict__: nothing else is stored on a record


def test_a_bls_response_and_a_responses_entry_name_their_fields() -> None:
    _, _, _, bls, resp, entry, op = _records()
    assert (bls.model_name, bls.model_version, bls.request.request_id) == ("m", -1, "x")
    assert (resp.batch_id, resp.request_index, resp.flags) == (0, 0, C.RESP_FINAL)
    assert (resp.has_error, resp.error_code, resp.error_message, resp.outputs) == (
        True,
        3,
        "bad",
        (),
    )
    assert (entry.batch_id, entry.request_index, entry.error_code) == (9, 2, 3)
    assert (op.op, op.metric, op.value, op.family, op.values) == (C.OP_INCREMENT, 3, 2.5, 0, ())
