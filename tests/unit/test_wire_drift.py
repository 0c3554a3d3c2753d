# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Every codec against the records of docs/protocol.toml, field by field.

tests/spec_codec.py encodes each binary frame body by walking the spec's
records. Each frame kind below, with values that differ field from field
and byte from byte (a swapped, narrowed or reordered field shows), must be:
- encoded and decoded the same by the reference (tests/protocol_ref.py);
- decoded the same by the stub's Cython codec, and encoded the same where
  the stub sends it;
- decoded the same and re-encoded to the same bytes by the backend's C++
  codec (tritonpy_golden_test, given these frames as its golden set).
So an edit of the spec without the codecs, or of a codec without the
spec, fails here."""

from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from codec_forms import STUB_SENT_TYPES, cython_decode, encode_with_writer, golden_test_binary
from spec_codec import SpecCodec, first_difference

from tritonpy.stub import _codec as C

import protocol_ref as P

INT32, FP32, UINT8 = 8, 11, 2
SPEC = SpecCodec()


def _inline(name: str, dtype: int, dims: list[int], data: bytes) -> dict[str, Any]:
    return P.inline(name, dtype, dims, data)


def _in_arena(name: str, location: int, arena_id: int, offset: int) -> dict[str, Any]:
    t = P.Tensor(name, INT32, [3, 1], 12, location, b"", arena_id, offset)
    return t.to_json()


def _request(n: int) -> dict[str, Any]:
    """A request whose every field holds its own value (``n`` varies them)."""
    return P.request(
        f"req-{n}-\u00e9",
        [
            _inline(f"IN{n}", FP32, [2, 2], bytes(range(16 * n, 16 * n + 16))),
            _in_arena(f"REF{n}", P.LOC_ARENA, 0x21222324 + n, 0x3132333435363738 + n),
        ],
        correlation_kind=1 if n == 1 else 2,
        correlation_u64=0x0102030405060708 if n == 1 else 0,
        correlation_str="" if n == 1 else "corr-\u03b2",
        flags=3,
        timeout_us=0x1112131415161718 + n,
        parameters=f'{{"p":{n}}}',
        requested_outputs=[f"OUT_A{n}", "OUT_B"],
        trace_context=f'{{"traceparent":"00-{n}"}}',
    )


def _response(outputs: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    r = {
        "response_flags": P.RESP_FINAL,
        "has_error": 0,
        "error_code": 0,
        "error_message": "",
        "parameters": '{"r":"s"}',
        "outputs": outputs,
    }
    r.update(kw)
    return r


def _allocations() -> dict[str, Any]:
    return {
        "allocations": [
            {"arena_id": 0x51525354, "offset": 0x6162636465666768},
            {"arena_id": 3, "offset": 0x40},
        ]
    }


# (file, type, id, flags, body): one of every binary frame kind.
FRAMES: list[tuple[str, str, int, int, dict[str, Any]]] = [
    ("execute", "EXECUTE", 0x0A0B0C0D0E0F1011, 0, {"requests": [_request(1), _request(2)]}),
    (
        "responses",
        "RESPONSES",
        0x4142434445464748,
        P.FLAG_BATCH_DONE,
        {
            "responses": [
                {
                    "batch_id": 0x4142434445464748,
                    "request_index": 0x00030201,
                    **_response(
                        [
                            _inline("OUT0", UINT8, [5], b"\x01\x02\x03\x04\x05"),
                            _in_arena("OUT1", P.LOC_RECEIVER_ARENA, 0x71, 0x7273747576),
                        ],
                        response_flags=P.RESP_FINAL | P.RESP_BATCH_END,
                    ),
                },
                {
                    "batch_id": 0x4142434445464749,
                    "request_index": 6,
                    **_response(
                        [], has_error=1, error_code=3, error_message="bad \u2717", parameters=""
                    ),
                },
            ]
        },
    ),
    ("execute_done", "EXECUTE_DONE", 0x99, 0, {"ok": 0, "error": "Traceback: x"}),
    (
        "log",
        "LOG",
        0,
        0,
        {"level": 2, "file": "model.py", "line": 0x00012345, "message": "log \u2713"},
    ),
    ("error", "ERROR", 0, 0, {"message": "broken pipe of thought"}),
    ("release", "RELEASE", 0, 0, _allocations()),
    ("bls_release", "BLS_RELEASE", 0, 0, _allocations()),
    ("arena", "ARENA", 0, 0, {"arena_id": 0x71727374, "size": 0x0000000102030405}),
    ("bls_arena", "BLS_ARENA", 0, 0, {"arena_id": 0x61626364, "size": 0x0000000504030201}),
    (
        "cancel",
        "CANCEL",
        0,
        0,
        {
            "requests": [
                {"batch_id": 0x8182838485868788, "request_index": 0x090A0B0C},
                {"batch_id": 2, "request_index": 1},
            ]
        },
    ),
    (
        "send_error",
        "SEND_ERROR",
        0,
        0,
        {
            "batch_id": 0x1112131415161718,
            "request_index": 0x21222324,
            "error_code": 6,
            "message": "gone",
        },
    ),
    ("ready", "READY", 0x33, 0, {"ready": 1, "message": "warming up"}),
    ("is_ready", "IS_READY", 0x34, 0, {}),
    ("drain", "DRAIN", 0, 0, {}),
    ("finalize", "FINALIZE", 0, 0, {}),
    ("bls_cancel", "BLS_CANCEL", 0x35, 0, {}),
    ("bls_channel", "BLS_CHANNEL", 0, 0, {}),
    (
        "bls_request",
        "BLS_REQUEST",
        0x36,
        0,
        {
            "model_name": "callee",
            "model_version": 0x0102030405,
            "trace_batch_id": 0x0A0B0C0D0E0F,
            "trace_request_index": 0x00050607,
            "request": {**_request(2), "trace_context": ""},
        },
    ),
    (
        "bls_response",
        "BLS_RESPONSE",
        0x37,
        0,
        _response(
            [
                _inline("SUM", INT32, [1, 2], b"\x10\x11\x12\x13\x14\x15\x16\x17"),
                _in_arena("DIFF", P.LOC_ARENA, 0x0C0D, 0x0E0F1011),
            ],
            parameters='{"b":true}',
        ),
    ),
    (
        "metric",
        "METRIC",
        0x38,
        0,
        {
            "ops": [
                {
                    "op": P.OP_FAMILY_NEW,
                    "family": 0x01020304,
                    "kind": P.METRIC_HISTOGRAM,
                    "name": "fam",
                    "description": "a family",
                },
                {
                    "op": P.OP_METRIC_NEW,
                    "metric": 0x11121314,
                    "family": 0x01020304,
                    "labels": [["k1", "v1"], ["k2", "v\u00e9"]],
                    "buckets": [0.5, 2.0, 8.25],
                },
                {"op": P.OP_INCREMENT, "metric": 0x11121314, "value": 1.5},
                {"op": P.OP_SET, "metric": 0x21222324, "value": -3.75},
                {"op": P.OP_OBSERVE, "metric": 0x31323334, "values": [0.25, 4.5]},
                {"op": P.OP_VALUE, "metric": 0x41424344},
                {"op": P.OP_METRIC_DELETE, "metric": 0x51525354},
                {"op": P.OP_FAMILY_DELETE, "family": 0x61626364},
            ]
        },
    ),
    ("metric_done", "METRIC_DONE", 0x39, 0, {"ok": 1, "error": "", "value": 2.5}),
    ("log_levels", "LOG_LEVELS", 0, 0, {"enabled": 0b1011}),
]
ENTRIES = [
    {"file": f"{name}.bin", "type": t, "id": fid, "flags": flags, "body": body}
    for name, t, fid, flags, body in FRAMES
]
IDS = [e["type"] for e in ENTRIES]


def _spec_frame(entry: dict[str, Any]) -> bytes:
    return SPEC.encode(entry["type"], entry["body"], entry["id"], entry["flags"])


def _want(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry[k] for k in ("type", "id", "flags", "body")}


def _same_bytes(got: bytes, entry: dict[str, Any], codec: str) -> None:
    """``got`` is the spec's encoding of ``entry``; if not, name the first
    field where they part."""
    want = _spec_frame(entry)
    if got == want:
        return
    try:
        where = first_difference(SPEC.decode(got), _want(entry))
    except (ValueError, KeyError, StopIteration) as e:
        where = f"the spec cannot read it ({e})"
    pytest.fail(f"{codec} encodes {entry['type']} unlike docs/protocol.toml: {where}")


def test_every_binary_frame_kind_is_covered() -> None:
    assert set(IDS) == set(SPEC.spec.body_of)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_spec_codec_reads_what_it_writes(entry: dict[str, Any]) -> None:
    assert SPEC.decode(_spec_frame(entry)) == _want(entry)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_reference_codec_follows_the_spec(entry: dict[str, Any]) -> None:
    ftype = P.TYPE_VALUES[entry["type"]]
    frame = P.encode(ftype, entry["body"], id=entry["id"], flags=entry["flags"])
    _same_bytes(frame, entry, "tests/protocol_ref.py")
    got = P.decode(_spec_frame(entry))
    assert first_difference(got, _want(entry)) is None


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_cython_codec_follows_the_spec(entry: dict[str, Any]) -> None:
    got = cython_decode(_spec_frame(entry))
    assert first_difference(got, _want(entry)) is None
    if entry["type"] in STUB_SENT_TYPES:
        _same_bytes(encode_with_writer(entry), entry, "the stub's Cython codec")


def test_cpp_codec_follows_the_spec(tmp_path: Path) -> None:
    binary = golden_test_binary()
    assert binary is not None, "build/cmake/tritonpy_golden_test was not built (pip install .)"
    for entry in ENTRIES:
        (tmp_path / entry["file"]).write_bytes(_spec_frame(entry))
    (tmp_path / "frames.json").write_text(json.dumps(ENTRIES))
    out = subprocess.run([str(binary), str(tmp_path)], capture_output=True, text=True, timeout=120)
    failed = [line for line in out.stdout.splitlines() if line.startswith("FAIL")]
    assert not failed and out.returncode == 0, "\n".join(failed) or out.stdout + out.stderr
    assert f"{len(ENTRIES)} passed, 0 failed" in out.stdout


def _spec_with(tmp_path: Path, old: str, new: str) -> SpecCodec:
    spec_text = (Path(__file__).resolve().parents[2] / "docs" / "protocol.toml").read_text()
    assert spec_text.count(old) == 1, old
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "protocol.toml").write_text(spec_text.replace(old, new))
    return SpecCodec(tmp_path)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # A field narrowed, two fields swapped, a field added.
        ('{ name = "timeout_us", type = "u64" }', '{ name = "timeout_us", type = "u32" }'),
        (
            '{ name = "batch_id", type = "u64" },\n  { name = "request_index", type = "u32" },\n'
            '  { name = "response", type = "response", flat = true },',
            '{ name = "request_index", type = "u32" },\n  { name = "batch_id", type = "u64" },\n'
            '  { name = "response", type = "response", flat = true },',
        ),
        (
            '{ name = "level", type = "u32" },',
            '{ name = "level", type = "u32" },\n  { name = "pid", type = "u32" },',
        ),
    ],
    ids=["narrowed", "swapped", "added"],
)
def test_a_spec_edit_alone_is_caught(tmp_path: Path, old: str, new: str) -> None:
    """The yardstick moves with the spec: edit it and the codecs disagree."""
    edited = _spec_with(tmp_path, old, new)
    parted = 0
    for entry in ENTRIES:
        ftype = P.TYPE_VALUES[entry["type"]]
        body = dict(entry["body"], pid=7) if entry["type"] == "LOG" else entry["body"]
        frame = P.encode(ftype, entry["body"], id=entry["id"], flags=entry["flags"])
        try:
            mine: bytes | None = edited.encode(entry["type"], body, entry["id"], entry["flags"])
        except struct.error:  # a value no longer fits the edited field
            mine = None
        parted += mine != frame
    assert parted >= 1


def test_layout_constants_are_the_spec_codecs_sizes() -> None:
    """Records encode to the sizes generated from them."""
    names = SPEC.spec.layout_names()
    one = _allocations()["allocations"][:1]
    frame = SPEC.encode("RELEASE", {"allocations": one})
    assert len(frame) == C.HEADER_SIZE + names["RELEASE_MIN_SIZE"] + names["ALLOCATION_SIZE"]
    frame = SPEC.encode("ARENA", FRAMES[7][4])
    assert len(frame) == C.HEADER_SIZE + names["ARENA_SIZE"]


# The hand-written codecs, found by name wherever backend/src's folders put them.
CODEC_SOURCES = (
    ("backend/src", "protocol*.cc"),
    ("backend/src", "protocol_codec.h"),
    ("backend/src", "stub_frames.cc"),
    ("backend/src", "bls*.cc"),
    ("src/tritonpy/stub", "_codec.pyx"),
    ("src/tritonpy/stub", "_decode.pxi"),
    ("src/tritonpy/stub", "_codec_frames.pxi"),
    ("src/tritonpy/stub", "_bls_wire.pyx"),
    ("tests", "protocol_ref.py"),
)
# What a size or offset written by hand looks like: a sum of numbers, or a
# number as the size of a read, a write, a copy or a count's item.
_LAYOUT_LITERAL = re.compile(
    r"\b\d+ \+ \d+\b"
    r"|\b(?:need|Take|Count|put|memcpy|resize)\([^;]*?(?:,|\(|\+|\*) *\d+\)"
    r"|\b(?:Take|Count)\(\d+,"
    r"|start=\d+|HEADER_SIZE \+ \d+|% 8\b"
)


def test_no_layout_constant_is_written_by_hand() -> None:
    """Sizes and offsets in the codecs are generated names
    (backend/src/protocol/protocol_wire.h, stub/_wire.pxd, protocol_ref's region)."""
    root = Path(__file__).resolve().parents[2]
    files = [p for folder, glob in CODEC_SOURCES for p in sorted((root / folder).rglob(glob))]
    assert len(files) >= len(CODEC_SOURCES)
    found = []
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//")[0] if path.suffix in (".cc", ".h") else line.split("#")[0]
            if _LAYOUT_LITERAL.search(code):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert found == []
