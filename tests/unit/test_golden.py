# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Both real codecs against the golden frames of docs/protocol.md.

The golden files come from tests/protocol_ref.py (plain struct code). The
Cython codec of the stub is checked here; the C++ codec of the backend by
the program tritonpy_golden_test, run here too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from codec_forms import (
    STUB_SENT_TYPES,
    cython_decode,
    encode_with_writer,
    golden_test_binary,
)

from tritonpy.stub import _codec as C

import protocol_ref as P

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
ENTRIES = json.loads((GOLDEN / "frames.json").read_text())
VALID = [e for e in ENTRIES if not e.get("invalid")]
INVALID = [e for e in ENTRIES if e.get("invalid")]


def test_golden_files_are_current(tmp_path: Path) -> None:
    """make_golden.py regenerates exactly the committed files."""
    out = subprocess.run(
        [sys.executable, str(GOLDEN / "make_golden.py"), str(tmp_path)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "wrote" in out.stdout
    fresh = sorted(p.name for p in tmp_path.iterdir())
    assert fresh == sorted(p.name for p in GOLDEN.iterdir() if p.suffix in (".bin", ".json"))
    for name in fresh:
        assert (tmp_path / name).read_bytes() == (GOLDEN / name).read_bytes(), name


@pytest.mark.parametrize("entry", VALID, ids=lambda e: e["file"])
def test_cython_decodes_golden(entry: dict[str, Any]) -> None:
    buf = (GOLDEN / entry["file"]).read_bytes()
    got = cython_decode(buf)
    assert got == {k: entry[k] for k in ("type", "id", "flags", "body")}


@pytest.mark.parametrize("entry", INVALID, ids=lambda e: e["file"])
def test_cython_rejects_invalid(entry: dict[str, Any]) -> None:
    buf = (GOLDEN / entry["file"]).read_bytes()
    with pytest.raises((C.ProtocolError, UnicodeDecodeError)):
        ftype, flags, fid, body_len = C.decode_header(buf)
        C.decode_body(ftype, buf)


@pytest.mark.parametrize("entry", VALID, ids=lambda e: e["file"])
def test_cython_rejects_every_truncation(entry: dict[str, Any]) -> None:
    buf = (GOLDEN / entry["file"]).read_bytes()
    for n in range(len(buf)):
        cut = bytearray(buf[:n])
        if n >= P.HEADER_SIZE:  # keep body_len honest so the body parser is what fails
            cut[16:20] = (n - P.HEADER_SIZE).to_bytes(4, "little")
        try:
            ftype, flags, fid, body_len = C.decode_header(bytes(cut))
            if flags & C.FLAG_BODY_IN_ARENA:
                C.decode_arena_ref(bytes(cut))
            else:
                C.decode_body(ftype, bytes(cut))
        except (C.ProtocolError, UnicodeDecodeError):
            continue
        # A frame whose body is empty by design (FINALIZE) or a JSON frame cut
        # at a point where it is still valid JSON may decode.
        assert entry["type"] in ("FINALIZE",) and n == len(buf), (entry["file"], n)


STUB_SENDS = [e for e in VALID if e["type"] in STUB_SENT_TYPES and not e["flags"] & 1]


@pytest.mark.parametrize("entry", STUB_SENDS, ids=lambda e: e["file"])
def test_cython_encodes_golden(entry: dict[str, Any]) -> None:
    want = (GOLDEN / entry["file"]).read_bytes()
    assert encode_with_writer(entry) == want


def test_metric_frames_split_and_carry_the_call_id_last() -> None:
    """Pending ops that exceed a frame go in several METRIC frames; only
    the last carries the call id, and a long OBSERVE list is cut into ops."""
    from tritonpy.stub.metrics import encode_metric

    ops = [
        (C.OP_OBSERVE, 1, [float(i) for i in range(40000)]),
        (C.OP_INCREMENT, 2, 1.0),
        (C.OP_VALUE, 2),
    ]
    frames = encode_metric(ops, 77)
    assert len(frames) > 2
    decoded = [P.decode(f) for f in frames]
    assert [d["id"] for d in decoded] == [0] * (len(frames) - 1) + [77]
    assert all(len(f) <= P.MAX_FRAME for f in frames)
    observed = [
        v
        for d in decoded
        for op in d["body"]["ops"]
        if op["op"] == C.OP_OBSERVE
        for v in op["values"]
    ]
    assert observed == [float(i) for i in range(40000)]
    assert decoded[-1]["body"]["ops"][-1] == {"op": C.OP_VALUE, "metric": 2}


def test_writer_body_in_arena() -> None:
    w = C.FrameWriter()
    w.begin(C.RESPONSES, 11, 0)
    w.u32(0)
    body = w.body_bytes()
    frame = w.finish_in_arena(1, 128)
    assert P.decode(frame) == {
        "type": "RESPONSES",
        "id": 11,
        "flags": 1,
        "body": {"arena_id": 1, "offset": 128, "body_len": len(body)},
    }


@pytest.mark.parametrize(
    "text",
    ["", "short", "\u00e9" * 20000, "x" * 40000, "\U0001f600" * 9000, "a\u00e9" * 13000],
)
@pytest.mark.parametrize("limit", [0, 27, 101, 32768, 65536])
def test_stub_text_cut_matches_the_reference(text: str, limit: int) -> None:
    cut = C.clip(text, limit)
    assert cut == P.clip(text, limit)
    if len(text.encode()) > limit >= 40:
        assert len(cut.encode()) <= limit
        assert cut.endswith(f"{C.TRUNCATED_START}{len(text.encode())}{C.TRUNCATED_END}")
    assert C.clip(cut, max(limit, 40)) == cut or len(cut.encode()) > max(limit, 40)


def test_stub_reads_text_that_is_not_utf8_as_replaced() -> None:
    frame = P.encode(P.ERROR, {"message": b"bad \xff\xe2\x82 text"})
    assert C.decode_body(C.ERROR, frame) == "bad \ufffd\ufffd text"
    assert P.decode(frame)["body"]["message"] == "bad \ufffd\ufffd text"


def test_cpp_codec_against_golden() -> None:
    binary = golden_test_binary()
    assert binary is not None, "build/cmake/tritonpy_golden_test was not built (pip install .)"
    out = subprocess.run([str(binary), str(GOLDEN)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    last = out.stdout.strip().splitlines()[-1]
    passed, failed = (int(x.split()[0]) for x in last.split(", "))
    assert failed == 0 and passed >= len(ENTRIES), out.stdout
