# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Property tests of the stub's frame decoder: whatever the bytes, it either
decodes or raises ProtocolError/UnicodeDecodeError; it never crashes, hangs
or reads outside the message (the C++ side has its own fuzzing in
backend/tests)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritonpy.stub import _codec as C

import protocol_ref as P

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
FRAMES = [
    (GOLDEN / e["file"]).read_bytes()
    for e in json.loads((GOLDEN / "frames.json").read_text())
    if not e.get("invalid")
]


def decode(buf: bytes) -> None:
    try:
        ftype, flags, _fid, _n = C.decode_header(buf)
        if flags & C.FLAG_BODY_IN_ARENA:
            C.decode_arena_ref(buf)
        else:
            C.decode_body(ftype, buf)
    except (C.ProtocolError, UnicodeDecodeError):
        pass


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes(data: bytes) -> None:
    decode(data)


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_mutated_golden_frames(data: st.DataObject) -> None:
    frame = bytearray(data.draw(st.sampled_from(FRAMES)))
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()) and len(frame) > P.HEADER_SIZE:
        # Keep the header's body_len consistent so the body parser is exercised.
        struct.pack_into("<I", frame, 16, len(frame) - P.HEADER_SIZE)
        frame[0:4] = struct.pack("<I", P.MAGIC)
        frame[4] = P.VERSION
    decode(bytes(frame))


@settings(max_examples=1000, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_huge_counts_and_lengths_are_refused_quickly(count: int, length: int) -> None:
    body = struct.pack("<II", count, length)
    for ftype in (C.EXECUTE, C.RESPONSES, C.RELEASE, C.CANCEL):
        frame = P.HEADER.pack(P.MAGIC, P.VERSION, ftype, 0, 0, len(body), 0) + body
        decode(frame)
