# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Writes tests/golden/*.bin and frames.json from the reference codec.

Run ``python tests/golden/make_golden.py`` after changing docs/protocol.md;
tests/unit/test_golden.py fails if the committed files are stale.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import protocol_ref as P  # noqa: E402

FP32, INT32, BYTES, BOOL, FP16, BF16, UINT64 = 11, 8, 13, 1, 10, 14, 5
UINT8 = 2


def valid() -> list[tuple[str, int, dict[str, Any], int, int]]:
    """(file, type, body, id, flags) of every valid golden frame."""
    a = struct.pack("<4f", 0.5, 1.5, -2.0, 3.25)
    b = struct.pack("<4i", 1, -2, 3, 2**31 - 1)
    words = b"".join(struct.pack("<I", len(w)) + w for w in (b"hello", b"", "h\u00e9".encode()))
    return [
        (
            "hello.bin",
            P.HELLO,
            {
                "json": {
                    "protocol": 1,
                    "pid": 4242,
                    "python": "3.11.7",
                    "executable": "/usr/bin/python3",
                }
            },
            0,
            0,
        ),
        (
            "init.bin",
            P.INIT,
            {
                "json": {
                    "args": {
                        "model_config": '{"name":"add_sub"}',
                        "model_instance_kind": "CPU",
                        "model_instance_name": "add_sub_0_0",
                        "model_instance_device_id": "0",
                        "model_repository": "/models/add_sub",
                        "model_version": "1",
                        "model_name": "add_sub",
                    },
                    "model_file": "/models/add_sub/1/model.py",
                    "model_dir": "/models/add_sub/1",
                    "settings": {"decoupled": False},
                }
            },
            0,
            0,
        ),
        ("init_done_ok.bin", P.INIT_DONE, {"json": {"ok": True}}, 0, 0),
        (
            "init_done_error.bin",
            P.INIT_DONE,
            {"json": {"ok": False, "error": "boom\nTraceback"}},
            0,
            0,
        ),
        ("arena.bin", P.ARENA, {"arena_id": 3, "size": 64 << 20}, 0, 0),
        (
            "execute_add_sub.bin",
            P.EXECUTE,
            {
                "requests": [
                    P.request(
                        "req-1",
                        [P.inline("INPUT0", FP32, [4], a), P.inline("INPUT1", FP32, [4], a)],
                        requested_outputs=["OUTPUT0", "OUTPUT1"],
                    )
                ]
            },
            7,
            0,
        ),
        (
            "execute_batch.bin",
            P.EXECUTE,
            {
                "requests": [
                    P.request("", [P.inline("IN", INT32, [1, 4], b)]),
                    P.request(
                        "second",
                        [P.inline("IN", INT32, [2, 2], b)],
                        correlation_kind=1,
                        correlation_u64=2**63 + 5,
                        flags=3,
                        timeout_us=1500000,
                        parameters='{"k":"v","n":3,"b":true}',
                    ),
                    P.request(
                        "third",
                        [P.inline("IN", INT32, [0, 4], b"")],
                        correlation_kind=2,
                        correlation_str="seq-\u00e9",
                        trace_context='{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}',
                    ),
                ]
            },
            2**40 + 1,
            0,
        ),
        (
            "execute_types.bin",
            P.EXECUTE,
            {
                "requests": [
                    P.request(
                        "t",
                        [
                            P.inline("S", BYTES, [3], words),
                            P.inline("B", BOOL, [3], b"\x01\x00\x01"),
                            P.inline("H", FP16, [1], b"\x00\x3c"),
                            P.inline("Z", BF16, [2], b"\x80\x3f\x00\x40"),
                            P.inline("SCALAR", UINT64, [], struct.pack("<Q", 9)),
                            P.Tensor("BIG", FP32, [1024, 1024], 4 << 20, 1, b"", 3, 4096).to_json(),
                        ],
                    )
                ]
            },
            9,
            0,
        ),
        (
            "execute_in_arena.bin",
            P.EXECUTE,
            {"arena_id": 1, "offset": 128, "body_len": 200000},
            11,
            P.FLAG_BODY_IN_ARENA,
        ),
        (
            "responses_add_sub.bin",
            P.RESPONSES,
            {
                "responses": [
                    {
                        "batch_id": 7,
                        "request_index": 0,
                        "response_flags": 1,
                        "has_error": 0,
                        "error_code": 0,
                        "error_message": "",
                        "parameters": "",
                        "outputs": [
                            P.inline("OUTPUT0", FP32, [4], a),
                            P.inline("OUTPUT1", FP32, [4], a),
                        ],
                    }
                ]
            },
            7,
            P.FLAG_BATCH_DONE,
        ),
        (
            "responses_mixed.bin",
            P.RESPONSES,
            {
                "responses": [
                    {
                        "batch_id": 2**40 + 1,
                        "request_index": 1,
                        "response_flags": 1,
                        "has_error": 1,
                        "error_code": 3,
                        "error_message": "model 'm': bad input",
                        "parameters": "",
                        "outputs": [],
                    },
                    {
                        "batch_id": 2**40 + 1,
                        "request_index": 0,
                        "response_flags": 1,
                        "has_error": 0,
                        "error_code": 0,
                        "error_message": "",
                        "parameters": '{"p":1}',
                        "outputs": [
                            P.Tensor("OUT", FP32, [256, 1024], 1 << 20, 1, b"", 1, 64).to_json()
                        ],
                    },
                ]
            },
            2**40 + 1,
            P.FLAG_BATCH_DONE,
        ),
        (
            "responses_partial.bin",
            P.RESPONSES,
            {
                "responses": [
                    {
                        "batch_id": 5,
                        "request_index": 2,
                        "response_flags": 1,
                        "has_error": 0,
                        "error_code": 0,
                        "error_message": "",
                        "parameters": "",
                        "outputs": [],
                    }
                ]
            },
            0,
            0,
        ),
        (
            "responses_decoupled.bin",
            P.RESPONSES,
            {
                "responses": [
                    {
                        "batch_id": 8,
                        "request_index": 0,
                        "response_flags": 0,
                        "has_error": 0,
                        "error_code": 0,
                        "error_message": "",
                        "parameters": '{"t":"x"}',
                        "outputs": [P.inline("TOKEN", INT32, [1], struct.pack("<i", 17))],
                    },
                    {
                        "batch_id": 9,
                        "request_index": 3,
                        "response_flags": P.RESP_FINAL | P.RESP_NO_RESPONSE,
                        "has_error": 0,
                        "error_code": 0,
                        "error_message": "",
                        "parameters": "",
                        "outputs": [],
                    },
                    {
                        "batch_id": 9,
                        "request_index": 1,
                        "response_flags": P.RESP_RESCHEDULE | P.RESP_NO_RESPONSE,
                        "has_error": 0,
                        "error_code": 0,
                        "error_message": "",
                        "parameters": "",
                        "outputs": [],
                    },
                    {
                        "batch_id": 10,
                        "request_index": 0,
                        "response_flags": P.RESP_FINAL,
                        "has_error": 1,
                        "error_code": 7,
                        "error_message": "cancelled",
                        "parameters": "",
                        "outputs": [],
                    },
                ]
            },
            0,
            0,
        ),
        (
            "responses_batch_end.bin",
            P.RESPONSES,
            {
                "responses": [
                    {
                        "batch_id": 21,
                        "request_index": 0,
                        "response_flags": P.RESP_FINAL | P.RESP_BATCH_END,
                        "has_error": 0,
                        "error_code": 0,
                        "error_message": "",
                        "parameters": "",
                        "outputs": [P.inline("OUT", INT32, [1], struct.pack("<i", 21))],
                    },
                    {
                        "batch_id": 22,
                        "request_index": 1,
                        "response_flags": P.RESP_FINAL,
                        "has_error": 1,
                        "error_code": 3,
                        "error_message": "bad",
                        "parameters": "",
                        "outputs": [],
                    },
                    {
                        "batch_id": 22,
                        "request_index": 0,
                        "response_flags": P.RESP_FINAL | P.RESP_BATCH_END,
                        "has_error": 0,
                        "error_code": 0,
                        "error_message": "",
                        "parameters": "",
                        "outputs": [],
                    },
                ]
            },
            0,
            0,
        ),
        (
            "responses_receiver_arena.bin",
            P.RESPONSES,
            {
                "responses": [
                    {
                        "batch_id": 12,
                        "request_index": 0,
                        "response_flags": 1,
                        "has_error": 0,
                        "error_code": 0,
                        "error_message": "",
                        "parameters": "",
                        "outputs": [
                            P.Tensor(
                                "OUTPUT0", UINT8, [1 << 20], 1 << 20, 2, b"", 1, 4096
                            ).to_json(),
                            P.Tensor("OUTPUT1", UINT8, [8], 8, 1, b"", 2, 64).to_json(),
                        ],
                    }
                ]
            },
            12,
            P.FLAG_BATCH_DONE,
        ),
        ("execute_done_ok.bin", P.EXECUTE_DONE, {"ok": 1, "error": ""}, 5, 0),
        ("execute_done_error.bin", P.EXECUTE_DONE, {"ok": 0, "error": "Traceback: boom"}, 5, 0),
        ("log.bin", P.LOG, {"level": 1, "file": "model.py", "line": 42, "message": "warned"}, 0, 0),
        # Any frame of the stub's whose body is larger than a frame ("Text").
        (
            "log_in_arena.bin",
            P.LOG,
            {"arena_id": 2, "offset": 4096, "body_len": 300020},
            0,
            P.FLAG_BODY_IN_ARENA,
        ),
        (
            "execute_done_in_arena.bin",
            P.EXECUTE_DONE,
            {"arena_id": 2, "offset": 512, "body_len": 200005},
            5,
            P.FLAG_BODY_IN_ARENA,
        ),
        # A text cut to MAX_BACKEND_TEXT, marker included, between the two
        # bytes of no character.
        (
            "error_truncated.bin",
            P.ERROR,
            {"message": P.clip("\u00e9" * 20000, P.MAX_BACKEND_TEXT)},
            0,
            0,
        ),
        ("finalize.bin", P.FINALIZE, {}, 0, 0),
        ("finalize_done.bin", P.FINALIZE_DONE, {"json": {"ok": True}}, 0, 0),
        ("error.bin", P.ERROR, {"message": "bad frame"}, 0, 0),
        (
            "cancel.bin",
            P.CANCEL,
            {
                "requests": [
                    {"batch_id": 9, "request_index": 3},
                    {"batch_id": 2**63, "request_index": 0},
                ]
            },
            0,
            0,
        ),
        (
            "send_error.bin",
            P.SEND_ERROR,
            {"batch_id": 9, "request_index": 1, "error_code": 7, "message": "request cancelled"},
            0,
            0,
        ),
        ("is_ready.bin", P.IS_READY, {}, 3, 0),
        ("drain.bin", P.DRAIN, {}, 0, 0),
        ("bls_channel.bin", P.BLS_CHANNEL, {}, 0, 0),
        ("log_levels.bin", P.LOG_LEVELS, {"enabled": 0b1101}, 0, 0),
        ("ready.bin", P.READY, {"ready": 0, "message": "warming up"}, 3, 0),
        (
            "release.bin",
            P.RELEASE,
            {"allocations": [{"arena_id": 1, "offset": 64}, {"arena_id": 2, "offset": 1 << 33}]},
            0,
            0,
        ),
        (
            "bls_request.bin",
            P.BLS_REQUEST,
            {
                "model_name": "add_sub",
                "model_version": -1,
                "trace_batch_id": 2**40 + 1,
                "trace_request_index": 2,
                "request": P.request(
                    "bls-1",
                    [
                        P.inline("INPUT0", FP32, [4], a),
                        P.Tensor("INPUT1", FP32, [4], 16, 1, b"", 2, 128).to_json(),
                    ],
                    requested_outputs=["OUTPUT0"],
                    correlation_kind=2,
                    correlation_str="seq-7",
                    flags=1,
                    timeout_us=250000,
                    parameters='{"x":1}',
                ),
            },
            12,
            0,
        ),
        (
            "bls_response.bin",
            P.BLS_RESPONSE,
            {
                "response_flags": 1,
                "has_error": 0,
                "error_code": 0,
                "error_message": "",
                "parameters": '{"n":2}',
                "outputs": [
                    P.inline("OUTPUT0", FP32, [4], a),
                    P.Tensor("OUTPUT1", FP32, [1024], 4096, 1, b"", 1, 192).to_json(),
                ],
            },
            12,
            0,
        ),
        (
            "bls_response_error.bin",
            P.BLS_RESPONSE,
            {
                "response_flags": 1,
                "has_error": 1,
                "error_code": 2,
                "error_message": "Request for unknown model: 'nope' is not found",
                "parameters": "",
                "outputs": [],
            },
            13,
            0,
        ),
        (
            "bls_response_stream.bin",
            P.BLS_RESPONSE,
            {
                "response_flags": 0,
                "has_error": 0,
                "error_code": 0,
                "error_message": "",
                "parameters": "",
                "outputs": [P.inline("OUT", INT32, [1], struct.pack("<i", 3))],
            },
            14,
            0,
        ),
        ("bls_cancel.bin", P.BLS_CANCEL, {}, 14, 0),
        ("bls_arena.bin", P.BLS_ARENA, {"arena_id": 1, "size": 64 << 20}, 0, 0),
        ("bls_release.bin", P.BLS_RELEASE, {"allocations": [{"arena_id": 1, "offset": 192}]}, 0, 0),
        (
            "model_control.bin",
            P.MODEL_CONTROL,
            {
                "json": {
                    "op": "load",
                    "model_name": "m",
                    "config": '{"backend":"python"}',
                    "files": {"file:1/model.py": "cHJpbnQoKQ=="},
                }
            },
            5,
            0,
        ),
        (
            "model_control_done.bin",
            P.MODEL_CONTROL_DONE,
            {"json": {"ok": False, "error": "load failed", "ready": False}},
            5,
            0,
        ),
        (
            "metric_create.bin",
            P.METRIC,
            {
                "ops": [
                    {"op": P.OP_INCREMENT, "metric": 3, "value": 2.5},
                    {
                        "op": P.OP_FAMILY_NEW,
                        "family": 4,
                        "kind": 2,
                        "name": "latency_seconds",
                        "description": "time per request, \u00e9",
                    },
                    {
                        "op": P.OP_METRIC_NEW,
                        "metric": 5,
                        "family": 4,
                        "labels": [["model", "m"], ["route", "a b"]],
                        "buckets": [0.005, 0.5, 10.0],
                    },
                ]
            },
            31,
            0,
        ),
        (
            "metric_updates.bin",
            P.METRIC,
            {
                "ops": [
                    {"op": P.OP_INCREMENT, "metric": 1, "value": 3.0},
                    {"op": P.OP_SET, "metric": 2, "value": -0.25},
                    {"op": P.OP_INCREMENT, "metric": 2, "value": 1.5},
                    {"op": P.OP_OBSERVE, "metric": 5, "values": [0.001, 0.75, 1e300]},
                    {"op": P.OP_METRIC_DELETE, "metric": 6},
                    {"op": P.OP_FAMILY_DELETE, "family": 7},
                ]
            },
            0,
            0,
        ),
        ("metric_value.bin", P.METRIC, {"ops": [{"op": P.OP_VALUE, "metric": 1}]}, 32, 0),
        ("metric_done.bin", P.METRIC_DONE, {"ok": 1, "error": "", "value": 42.5}, 32, 0),
        (
            "metric_done_error.bin",
            P.METRIC_DONE,
            {"ok": 0, "error": "Family name already exists with different type", "value": 0.0},
            31,
            0,
        ),
        (
            "auto_complete.bin",
            P.AUTO_COMPLETE,
            {
                "json": {
                    "model_name": "add_sub",
                    "config": '{"name":"add_sub","max_batch_size":0,"input":[],"output":[]}',
                    "model_file": "/models/add_sub/1/model.py",
                    "model_dir": "/models/add_sub/1",
                    "settings": {"decoupled": False},
                }
            },
            0,
            0,
        ),
        (
            "auto_complete_done.bin",
            P.AUTO_COMPLETE_DONE,
            {
                "json": {
                    "ok": True,
                    "config": '{"name":"add_sub","max_batch_size":4,"dynamic_batching":{}}',
                }
            },
            0,
            0,
        ),
        (
            "auto_complete_done_error.bin",
            P.AUTO_COMPLETE_DONE,
            {"json": {"ok": False, "error": "model 'add_sub': auto_complete_config raised"}},
            0,
            0,
        ),
    ]


def invalid(frames: dict[str, bytes]) -> list[tuple[str, bytes, str]]:
    ex = frames["execute_add_sub.bin"]
    rs = frames["responses_add_sub.bin"]

    def body_len(buf: bytes, n: int) -> bytes:
        return buf[:16] + struct.pack("<I", n) + buf[20:]

    huge_str = bytearray(ex)
    struct.pack_into("<I", huge_str, 28, 0xFFFFFFF0)  # first request id length
    huge_count = bytearray(rs)
    struct.pack_into("<I", huge_count, 24, 0x7FFFFFFF)  # response_count
    big_ndim = bytearray(frames["execute_add_sub.bin"])
    # INPUT0's ndim sits after: count(4) id(4+5) kind(1) u64(8) str(4) flags(4) timeout(8)
    # params(4) nreq(4) "OUTPUT0"(4+7) "OUTPUT1"(4+7) ninputs(4) name(4+6) dtype(4)
    off = 24 + 4 + 9 + 1 + 8 + 4 + 4 + 8 + 4 + 4 + 11 + 11 + 4 + 10 + 4
    assert struct.unpack_from("<I", big_ndim, off)[0] == 1
    struct.pack_into("<I", big_ndim, off, 1000)
    # INPUT0's location byte: after ndim(4), dims[0](8), byte_size(8).
    receiver_loc = bytearray(frames["execute_add_sub.bin"])
    assert receiver_loc[off + 20] == 0
    receiver_loc[off + 20] = 2
    bad_rflags = bytearray(rs)
    struct.pack_into("<I", bad_rflags, 24 + 4 + 8 + 4, 1 << 28)  # first entry's flags
    bad_pad = bytearray(rs)
    pad_at = bad_pad.index(struct.pack("<f", 0.5)) - 1
    bad_pad[pad_at] = 0xFF
    bad_op = bytearray(frames["metric_value.bin"])
    bad_op[28] = 9  # the op code after op_count
    bad_kind = bytearray(frames["metric_create.bin"])
    struct.pack_into("<I", bad_kind, 24 + 4 + 13 + 1 + 4, 3)  # FAMILY_NEW's kind
    bls = bytearray(frames["bls_response.bin"])
    struct.pack_into("<I", bls, 24, 1 << 30)  # response_flags
    bad_bls_flags = bytes(bls)
    bad_levels = bytearray(frames["log_levels.bin"])
    bad_levels[24] |= 0x10  # the bit after VERBOSE's
    return [
        ("bad_short.bin", ex[:20], "shorter than the header"),
        ("bad_magic.bin", b"XXXX" + ex[4:], "bad magic"),
        ("bad_version.bin", ex[:4] + b"\x02" + ex[5:], "unknown version"),
        ("bad_type.bin", ex[:5] + b"\x63" + ex[6:], "unknown frame type 99"),
        ("bad_flags.bin", ex[:6] + b"\x80\x00" + ex[8:], "unknown flag bit"),
        ("bad_body_len.bin", body_len(ex, len(ex) - 24 + 1), "body_len longer than the message"),
        # The last 4 bytes are the request's empty trace_context: cut into the tensor before.
        ("bad_truncated.bin", body_len(ex[:-7], len(ex) - 31), "body ends inside a tensor"),
        ("bad_trailing.bin", body_len(ex + b"\0\0\0\0", len(ex) - 20), "trailing bytes"),
        ("bad_huge_string.bin", bytes(huge_str), "string length past the end"),
        ("bad_huge_count.bin", bytes(huge_count), "count past the end"),
        ("bad_ndim.bin", bytes(big_ndim), "ndim over 64"),
        (
            "bad_location.bin",
            bytes(receiver_loc),
            "location 2 (receiver's arena) is for RESPONSES outputs only",
        ),
        ("bad_padding.bin", bytes(bad_pad), "non-zero padding"),
        ("bad_response_flags.bin", bytes(bad_rflags), "unknown response flag bit 29"),
        ("bad_bls_response_flags.bin", bad_bls_flags, "unknown BLS response flag bit 30"),
        ("bad_metric_op.bin", bytes(bad_op), "unknown metric op 9"),
        ("bad_metric_kind.bin", bytes(bad_kind), "unknown metric kind 3"),
        ("bad_log_levels.bin", bytes(bad_levels), "unknown log level bit 4"),
    ]


def main(out: Path = HERE) -> None:
    entries: list[dict[str, Any]] = []
    frames: dict[str, bytes] = {}
    for name, ftype, body, fid, flags in valid():
        buf = P.encode(ftype, body, id=fid, flags=flags)
        assert len(buf) <= P.MAX_FRAME
        assert P.decode(buf)["body"] == json.loads(json.dumps(body)), name
        frames[name] = buf
        entries.append(
            {"file": name, "type": P.TYPE_NAMES[ftype], "id": fid, "flags": flags, "body": body}
        )
    for name, buf, why in invalid(frames):
        try:
            P.decode(buf)
        except (P.ProtocolError, UnicodeDecodeError, ValueError):
            pass
        else:
            raise AssertionError(f"{name} decodes but must not: {why}")
        frames[name] = buf
        entries.append({"file": name, "invalid": True, "why": why})
    for name, buf in frames.items():
        (out / name).write_bytes(buf)
    (out / "frames.json").write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(entries)} golden frames to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
