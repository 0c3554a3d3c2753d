# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The frames the stub builds whole in its codec (stub/_codec_frames.pxi,
FrameWriter.begin_responses), byte for byte against the golden frames of
tests/protocol_ref.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritonpy.stub import _codec as C
from tritonpy.stub.outbound import check_fits, encode_metric

import protocol_ref as P

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
ENTRIES = {e["file"]: e for e in json.loads((GOLDEN / "frames.json").read_text())}


def _golden(name: str) -> tuple[bytes, dict[str, Any], int]:
    entry = ENTRIES[name]
    return (GOLDEN / name).read_bytes(), entry["body"], entry["id"]


def test_log_writer() -> None:
    want, body, _ = _golden("log.bin")
    w = C.log_writer(body["level"], body["file"], body["line"], body["message"])
    assert w.finish() == want


@pytest.mark.parametrize(
    ("name", "ftype", "flag", "text"),
    [
        ("execute_done_error.bin", C.EXECUTE_DONE, "ok", "error"),
        ("execute_done_ok.bin", C.EXECUTE_DONE, "ok", "error"),
        ("ready.bin", C.READY, "ready", "message"),
    ],
)
def test_flag_text_writer(name: str, ftype: int, flag: str, text: str) -> None:
    want, body, fid = _golden(name)
    assert C.flag_text_writer(ftype, fid, bool(body[flag]), body[text]).finish() == want


def test_error_writer() -> None:
    want, body, _ = _golden("error.bin")
    assert C.error_writer(body["message"]).finish() == want


@pytest.mark.parametrize(
    ("name", "ftype"),
    [
        ("model_control.bin", C.MODEL_CONTROL),
        ("init_done_error.bin", C.INIT_DONE),
        ("finalize_done.bin", C.FINALIZE_DONE),
    ],
)
def test_json_writer(name: str, ftype: int) -> None:
    want, body, fid = _golden(name)
    assert C.json_writer(ftype, body["json"], fid).finish() == want


def test_body_in_arena() -> None:
    assert C.body_in_arena((GOLDEN / "log_in_arena.bin").read_bytes())
    assert not C.body_in_arena((GOLDEN / "log.bin").read_bytes())


@pytest.mark.parametrize("name", ["responses_add_sub.bin", "responses_partial.bin"])
def test_begin_responses(name: str) -> None:
    """The header and count of a RESPONSES frame around the golden
    entries: the count given at once, and the count set once the entries
    are written (what _engine.pyx does when some requests of a batch answer
    through their senders)."""
    want, body, fid = _golden(name)
    entries = want[C.HEADER_SIZE + 4 :]
    done = bool(ENTRIES[name]["flags"] & C.FLAG_BATCH_DONE)
    w = C.FrameWriter()
    w.begin_responses(len(body["responses"]), fid, done)
    w.raw(entries)
    assert w.finish() == want
    w.begin_responses(99, fid, done)
    w.raw(entries)
    w.set_count(len(body["responses"]))
    assert w.finish() == want


def test_metric_op_too_large_is_the_models_error() -> None:
    op = (C.OP_FAMILY_NEW, 1, C.METRIC_COUNTER, "n" * C.MAX_FRAME, "")
    with pytest.raises(Exception, match="does not fit in one frame") as e:
        check_fits(op)
    assert type(e.value).__name__ == "TritonModelException"
    with pytest.raises(Exception, match="does not fit in one frame") as e:
        encode_metric([op], 3)
    assert type(e.value).__name__ == "TritonModelException"
    # The largest op that fits goes alone in one frame.
    room = C.MAX_FRAME - C.HEADER_SIZE - 4
    fits = (C.OP_FAMILY_NEW, 1, C.METRIC_COUNTER, "n" * (room - 17), "")
    assert check_fits(fits) == room
    (frame,) = encode_metric([(C.OP_VALUE, 2), fits, (C.OP_VALUE, 2)], 3)[1:2]
    assert len(frame) == C.MAX_FRAME
    assert P.decode(frame)["body"]["ops"][0]["name"] == fits[3]


def test_metric_text_sizes_count_what_is_written() -> None:
    """A label with a lone surrogate is written escaped; its size is the
    escaped one, so frames are split where they fill up."""
    op = (C.OP_METRIC_NEW, 4, 1, [("k\udcff", "é")], [1.0])
    (frame,) = encode_metric([op], 9)
    ops = P.decode(frame)["body"]["ops"]
    assert [tuple(kv) for kv in ops[0]["labels"]] == [("k\\udcff", "é")]
    assert check_fits(op) == len(frame) - C.HEADER_SIZE - 4


def test_encode_releases() -> None:
    """One frame for the golden list; a long list split over frames that
    each fit, in order."""
    want, body, _ = _golden("bls_release.bin")
    refs = [(a["arena_id"], a["offset"]) for a in body["allocations"]]
    assert C.encode_releases(C.BLS_RELEASE, refs) == [want]
    many = [(i % 7, 8 * i) for i in range(20000)]
    frames = C.encode_releases(C.RELEASE, many)
    assert len(frames) == 3
    assert all(len(f) <= C.MAX_FRAME for f in frames)
    assert len(frames[0]) > C.MAX_FRAME - C.ARENA_REF_SIZE  # as full as it gets
    back = [
        (a["arena_id"], a["offset"]) for f in frames for a in P.decode(f)["body"]["allocations"]
    ]
    assert back == many
    assert C.encode_releases(C.RELEASE, []) == []
