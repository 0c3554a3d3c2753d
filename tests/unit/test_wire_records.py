# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub's RESPONSES entries are named records (stub/_codec.pxd), made in
stub/_batch.pyx and encoded, with their sizes, in stub/_codec.pyx."""

from __future__ import annotations

import numpy as np

from tritonpy import pb_utils as pb
from tritonpy.stub import _batch
from tritonpy.stub import _codec as C


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
    (bid, idx, flags, err, params, tensors), second = _decode(w.finish())
    assert (bid, idx, flags, err, params) == (7, 1, C.RESP_FINAL, None, '{"k": 1}')
    assert [t[:5] for t in tensors] == [("OUT", 11, (4,), 16, C.LOC_INLINE)]
    assert second[:5] == (7, 0, C.RESP_FINAL, (code, "no"), "")


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
