# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Request content is data and texts have any length (docs/protocol.md,
"Text"): the real stub, driven over the real protocol, answers requests
whose texts are not UTF-8 or whose inputs it cannot take, one by one, and
sends texts longer than a frame through its arenas, cut with a marker only
past what the backend takes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import protocol_ref as P
from host import StubHost, f32, write_model

INT32, BYTES = 8, 13
INVALID_ARG = 3
BIG = "BIG-START " + "0123456789" * 30_000 + " BIG-END"  # 300 KB

ECHO = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            seen = [r.request_id(), r.correlation_id(), r.parameters(),
                    [t.name() for t in r.inputs()], sorted(r.requested_output_names())]
            text = np.array([repr(seen).encode()], dtype=object)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]))
        return out
"""


def seen(host: StubHost, entry: dict) -> str:
    (t,) = entry["outputs"]
    raw = host.tensor_bytes(t)
    return raw[4:].decode()


def test_texts_that_are_not_utf8_reach_the_model_replaced(host: StubHost, tmp_path: Path) -> None:
    assert host.load(tmp_path, ECHO)["ok"] is True
    odd = P.request(
        b"id-\xff\xfe",
        [P.inline(b"A\xc3", INT32, [1], bytes(4))],
        correlation_kind=2,
        correlation_str=b"seq-\xed\xa0\x80",  # an encoded surrogate: not UTF-8
        parameters=b'{"k":"v\x80"}',
        requested_outputs=["SEEN", b"X\xff"],
    )
    reply = host.execute(1, [odd, P.request("plain", [f32("A", [1])])])
    first, second = reply["body"]["responses"]
    assert not first["has_error"] and not second["has_error"]
    assert seen(host, first) == repr(
        [
            "id-\ufffd\ufffd",
            "seq-\ufffd\ufffd\ufffd",
            '{"k":"v\ufffd"}',
            ["A\ufffd"],
            ["SEEN", "X\ufffd"],
        ]
    )
    assert seen(host, second).startswith("['plain', 0,")


SHAPES = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "A").as_numpy()
            n = np.array([len(requests)], np.int32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("A", a),
                                                   pb_utils.Tensor("N", n)]))
        return out
"""


def test_an_input_that_disagrees_with_its_shape_fails_its_request_alone(
    host: StubHost, tmp_path: Path
) -> None:
    assert host.load(tmp_path, SHAPES, config={"name": "shapes"})["ok"] is True
    pid = host.proc.pid
    # Three FP32 elements in eight bytes; and a shape whose size overflows.
    short = P.request("short", [P.inline("A", 11, [3], bytes(8))])
    huge = P.request("huge", [P.inline("A", INT32, [2**62], b"")])
    good = P.request("good", [f32("A", [1, 2])])
    host.send(P.encode(P.EXECUTE, {"requests": [short, good, huge]}, id=4))
    got = host.entries(lambda g: {"batch_done": 4} in g)
    errors = {e["request_index"]: e for e in got if e.get("has_error")}
    assert set(errors) == {0, 2}, got
    for index, rid in ((0, "short"), (2, "huge")):
        msg = errors[index]["error_message"]
        assert errors[index]["error_code"] == INVALID_ARG
        assert f"model 'shapes' request '{rid}': input 'A'" in msg, msg
    assert "needs 12 bytes; the EXECUTE frame carries 8" in errors[0]["error_message"]
    (answer,) = [e for e in got if e.get("request_index") == 1 and not e.get("has_error")]
    outs = {t["name"]: host.tensor_bytes(t) for t in answer["outputs"]}
    assert np.frombuffer(outs["A"], np.float32).tolist() == [1, 2]
    assert np.frombuffer(outs["N"], np.int32).tolist() == [1]  # execute() got one
    # A batch of nothing but such requests ends at once; the stub serves on.
    host.send(P.encode(P.EXECUTE, {"requests": [short]}, id=5))
    got = host.entries(lambda g: any(e.get("execute_done") == 5 for e in g))
    assert got[0]["has_error"] and got[-1] == {"execute_done": 5, "ok": 1, "error": ""}
    reply = host.execute(6, [good])
    assert not reply["body"]["responses"][0]["has_error"]
    assert host.proc.poll() is None and host.proc.pid == pid


RAISES_BIG = f"""
import triton_python_backend_utils as pb_utils

BIG = {BIG!r}

class TritonPythonModel:
    def execute(self, requests):
        mode = requests[0].request_id()
        if mode == "log":
            pb_utils.Logger.log_info(BIG)
            return [pb_utils.InferenceResponse([]) for _ in requests]
        if mode == "error":
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError(BIG))]
        if mode == "surrogate":
            raise ValueError("lone \\udcff surrogate")
        raise ValueError(BIG)

    def is_ready(self):
        raise ValueError(BIG)
"""


def test_texts_larger_than_a_frame_travel_in_an_arena(host: StubHost, tmp_path: Path) -> None:
    assert host.load(tmp_path, RAISES_BIG)["ok"] is True
    done = host.execute(1, [P.request("raise", [])])
    assert done["type"] == "EXECUTE_DONE" and "arena_ref" in done, done.get("flags")
    assert BIG in done["body"]["error"]
    assert any(BIG in log["message"] for log in host.logs)  # the official log line
    # A response's error, a log line and a READY message: whole too.
    entry = host.execute(2, [P.request("error", [])])["body"]["responses"][0]
    assert entry["error_message"] == BIG
    host.logs.clear()
    assert not host.execute(3, [P.request("log", [])])["body"]["responses"][0]["has_error"]
    assert [log["message"] for log in host.logs if BIG in log["message"]] == [BIG]
    host.send(P.encode(P.IS_READY, {}, id=9))
    ready = host.recv_type("READY")
    assert "arena_ref" in ready and BIG in ready["body"]["message"]
    # A text that is no UTF-8 (a lone surrogate) is sent escaped.
    done = host.execute(4, [P.request("surrogate", [])])
    assert "lone \\udcff surrogate" in done["body"]["error"]
    assert host.proc.poll() is None


def test_texts_past_the_backends_body_limit_are_cut_with_a_marker(
    host: StubHost, tmp_path: Path
) -> None:
    # The same model's error whole, from a stub without the limit: the cut
    # text must be its beginning, and its marker must give its length.
    unlimited = StubHost()
    try:
        assert unlimited.load(tmp_path, RAISES_BIG)["ok"] is True
        whole = unlimited.execute(1, [P.request("raise", [])])["body"]["error"]
    finally:
        unlimited.close()
    limit = 200_000
    settings = {"stub_max_body_bytes": limit}
    assert host.load(tmp_path, RAISES_BIG, settings=settings)["ok"] is True
    done = host.execute(1, [P.request("raise", [])])
    error = done["body"]["error"]
    assert "BIG-START" in error and "BIG-END" not in error
    marker = f"... [truncated, {len(whole.encode())} bytes]"
    assert error.endswith(marker), (error[-200:], marker)
    assert whole.startswith(error[: -len(marker)])
    assert len(error.encode()) <= limit
    entry = host.execute(2, [P.request("error", [])])["body"]["responses"][0]
    assert entry["error_message"].endswith(f"... [truncated, {len(BIG.encode())} bytes]")
    assert host.proc.poll() is None


def test_before_init_a_long_text_is_cut_to_a_frame(host: StubHost, tmp_path: Path) -> None:
    source = f"""
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        raise ValueError({BIG!r})

    def execute(self, requests):
        return []
"""
    done = host.auto_complete(write_model(tmp_path, source), {"name": "m"})
    assert done["ok"] is False
    assert "BIG-START" in done["error"] and "[truncated, " in done["error"]
    assert len(json.dumps(done)) < P.MAX_FRAME


def test_initialize_logs_and_fails_with_texts_larger_than_a_frame(
    host: StubHost, tmp_path: Path
) -> None:
    source = f"""
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_warn({BIG!r})
        raise RuntimeError({BIG!r})

    def execute(self, requests):
        return []
"""
    done = host.load(tmp_path, source)
    assert done["ok"] is False and BIG in done["error"]
    assert [log["message"] for log in host.logs if BIG in log["message"]] == [BIG]


def test_a_model_load_past_the_body_limit_fails_to_the_model(
    host: StubHost, tmp_path: Path
) -> None:
    source = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        try:
            pb_utils.load_model("other", config="x" * 300_000)
        except Exception as e:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))]
        return [pb_utils.InferenceResponse([])]
"""
    settings = {"stub_max_body_bytes": 200_000}
    assert host.load(tmp_path, source, settings=settings)["ok"] is True
    entry = host.execute(1, [P.request("load", [])])["body"]["responses"][0]
    assert "more than the backend takes (stub-max-body-bytes=200000)" in entry["error_message"]
    assert host.proc.poll() is None
