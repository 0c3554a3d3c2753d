# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The real stub process driven over the real protocol by tests/stub/host.py."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import protocol_ref as P
from host import FP32, StubHost, f32, write_model

INT32, BYTES = 8, 13

ADD_SUB = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(r, "B").as_numpy()
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SUM", a + b), pb_utils.Tensor("DIFF", a - b)]))
        return out
"""


def test_add_sub_inline(host: StubHost, tmp_path: Path) -> None:
    assert host.load(tmp_path, ADD_SUB)["ok"] is True
    reply = host.execute(7, [P.request("r1", [f32("A", [1, 2]), f32("B", [0.5, 4])])])
    assert reply["type"] == "RESPONSES" and reply["flags"] == P.FLAG_BATCH_DONE
    (resp,) = reply["body"]["responses"]
    assert resp["request_index"] == 0 and resp["response_flags"] == 1 and not resp["has_error"]
    outs = {t["name"]: np.frombuffer(host.tensor_bytes(t), np.float32) for t in resp["outputs"]}
    assert outs["SUM"].tolist() == [1.5, 6.0] and outs["DIFF"].tolist() == [0.5, -2.0]


def test_requested_outputs_only(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, ADD_SUB)
    reply = host.execute(
        1, [P.request("r", [f32("A", [1]), f32("B", [2])], requested_outputs=["DIFF"])]
    )
    assert [t["name"] for t in reply["body"]["responses"][0]["outputs"]] == ["DIFF"]


def test_an_output_keeps_the_shape_its_tensor_was_made_with(host: StubHost, tmp_path: Path) -> None:
    """As the official Tensor does (it keeps the dims it was made with): an
    array reshaped in place after ``Tensor(name, array)`` still answers
    with the shape it had then, and with the bytes it holds at return."""
    host.load(
        tmp_path,
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                return [self.reshaped() for _ in requests]

            def reshaped(self):
                a = np.arange(6, dtype=np.float32)
                b = np.arange(4, dtype=np.int32).reshape(2, 2)
                c = np.ones(20_000, np.float32)  # past the inline limit: an arena
                tensors = [pb_utils.Tensor(n, x) for n, x in zip("ABC", (a, b, c))]
                a.shape = (2, 3)
                a[0, 0] = 9
                b.shape = (4,)
                c.shape = (100, 200)
                return pb_utils.InferenceResponse(tensors)
    """,
    )
    (resp,) = host.execute(1, [P.request("r")])["body"]["responses"]
    a, b, c = resp["outputs"]
    assert [(t["name"], t["dims"]) for t in (a, b, c)] == [
        ("A", [6]),
        ("B", [2, 2]),
        ("C", [20_000]),
    ]
    assert c["location"] != 0 and np.frombuffer(host.tensor_bytes(c), np.float32).sum() == 20_000
    assert np.frombuffer(host.tensor_bytes(a), np.float32).tolist() == [9, 1, 2, 3, 4, 5]
    assert np.frombuffer(host.tensor_bytes(b), np.int32).tolist() == [0, 1, 2, 3]


def test_large_tensors_go_through_arenas(host: StubHost, tmp_path: Path) -> None:
    """Inputs in the host's memfd arena are read in place; large outputs come
    back in a stub arena (0600 memfd, announced first) and are freed on RELEASE."""
    host.load(tmp_path, ADD_SUB)
    n = 1 << 20  # 4 MiB of float32 per tensor
    arena = host.new_arena(5, 16 << 20)
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 2.0, dtype=np.float32)
    arena[0 : 4 * n] = a.tobytes()
    arena[4 * n : 8 * n] = b.tobytes()
    req = P.request(
        "big",
        [
            P.Tensor("A", FP32, [n], 4 * n, 1, b"", 5, 0).to_json(),
            P.Tensor("B", FP32, [n], 4 * n, 1, b"", 5, 4 * n).to_json(),
        ],
    )
    reply = host.execute(2, [req])
    outs = reply["body"]["responses"][0]["outputs"]
    assert all(t["location"] == 1 for t in outs)
    got = {t["name"]: np.frombuffer(host.tensor_bytes(t), np.float32) for t in outs}
    np.testing.assert_array_equal(got["SUM"], a + b)
    np.testing.assert_array_equal(got["DIFF"], a - b)
    release = [{"arena_id": t["arena_id"], "offset": t["offset"]} for t in outs]
    host.send(P.encode(P.RELEASE, {"allocations": release}))
    # The freed space is reused by the next batch: no new arena is needed.
    reply = host.execute(3, [req])
    outs2 = reply["body"]["responses"][0]["outputs"]
    assert {(t["arena_id"], t["offset"]) for t in outs2} == {
        (t["arena_id"], t["offset"]) for t in outs
    }


ALIASES = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            out.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("SAME", x), pb_utils.Tensor("HALF", x[x.size // 2:]),
                pb_utils.Tensor("COPY", x.copy()),
                pb_utils.get_input_tensor_by_name(r, "IN")]))
        return out
"""


def test_outputs_aliasing_inputs_are_sent_by_reference(host: StubHost, tmp_path: Path) -> None:
    """A large output whose bytes lie inside an input of its batch in a
    backend arena goes back as location 2 (no copy); anything else is copied."""
    host.load(tmp_path, ALIASES)
    n = 1 << 20
    arena = host.new_arena(4, 4 << 20)
    data = np.random.default_rng(1).integers(0, 255, n, dtype=np.uint8)
    arena[4096 : 4096 + n] = data.tobytes()
    req = P.request("r", [P.Tensor("IN", 2, [n], n, 1, b"", 4, 4096).to_json()])
    outs = {t["name"]: t for t in host.execute(1, [req])["body"]["responses"][0]["outputs"]}
    assert (outs["SAME"]["location"], outs["SAME"]["arena_id"], outs["SAME"]["offset"]) == (
        2,
        4,
        4096,
    )
    assert (outs["IN"]["location"], outs["IN"]["offset"]) == (2, 4096)
    assert (outs["HALF"]["location"], outs["HALF"]["offset"]) == (2, 4096 + n // 2)
    assert outs["HALF"]["byte_size"] == n // 2
    assert outs["COPY"]["location"] == 1
    assert host.tensor_bytes(outs["COPY"]) == data.tobytes()


def test_batch_of_many_requests_each_gets_its_own_answer(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, ADD_SUB)
    reqs = [P.request(f"r{i}", [f32("A", [i]), f32("B", [1])]) for i in range(64)]
    reply = host.execute(9, reqs)
    resps = reply["body"]["responses"]
    assert [r["request_index"] for r in resps] == list(range(64))
    for i, r in enumerate(resps):
        sums = {t["name"]: np.frombuffer(host.tensor_bytes(t), np.float32)[0] for t in r["outputs"]}
        assert sums["SUM"] == i + 1


@pytest.mark.parametrize(
    "answer,n,parameters",
    [
        # 40 answers of 6.4 KB: 256 KiB
        (
            'pb_utils.InferenceResponse([pb_utils.Tensor(f"O{i}", np.zeros(200, np.float32)) for i in range(8)])',
            40,
            {},
        ),
        # one answer of 200 KB
        (
            'pb_utils.InferenceResponse(parameters={"note": "n" * 200_000})',
            1,
            {"note": "n" * 200_000},
        ),
    ],
)
def test_huge_batch_metadata_travels_in_an_arena(
    host: StubHost, tmp_path: Path, answer: str, n: int, parameters: dict[str, str]
) -> None:
    """A batch whose response frame exceeds MAX_FRAME (many answers, or one
    answer alone) is sent BODY_IN_ARENA."""
    host.load(
        tmp_path,
        f"""
        import numpy as np
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                return [{answer} for _ in requests]
    """,
    )
    reply = host.execute(4, [P.request(f"r{i}") for i in range(n)])
    assert "arena_ref" in reply, "a response frame over MAX_FRAME must travel in the arena"
    entries = reply["body"]["responses"]
    assert len(entries) == n
    assert json.loads(entries[-1]["parameters"] or "{}") == parameters


BURST = """
import os
import time
import numpy as np
import triton_python_backend_utils as pb_utils
import tritonpy.stub._engine as engine
# How long a batch took, as the engine sees it, is what the model says: a
# quick batch preempted on a busy machine must not count as a slow one here.
CLOCK = [0]
assert callable(engine._now_ns)
engine._now_ns = lambda: CLOCK[0]
class TritonPythonModel:
    def initialize(self, args):
        # The batches sent meanwhile wait, to be read together: the test
        # makes the file once all of them are in the stub's socket.
        go = os.path.join(os.path.dirname(__file__), "go")
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.005)
    def execute(self, requests):
        if requests[0].request_id() == "slow":
            CLOCK[0] += 200_000_000
        elif requests[0].request_id() == "5ms":
            CLOCK[0] += 5_000_000
        return [pb_utils.InferenceResponse([pb_utils.Tensor(f"O{i}", np.full(200, int(r.request_id()[1:]) if r.request_id()[1:].isdigit() else 0, np.float32))
                for i in range(2)]) for r in requests]
"""


def _burst(
    host: StubHost, tmp_path: Path, sizes: dict[int, int], first: str = "", **settings: Any
) -> list[dict[str, Any]]:
    """The batches of ``sizes`` (id -> requests) sent right behind INIT,
    while the model initializes, the first request named ``first`` if
    given; returns the RESPONSES frames that answer them."""
    burst = []
    for batch_id, n in sizes.items():
        reqs = [P.request(f"r{batch_id * 100 + i}") for i in range(n)]
        burst.append(P.encode(P.EXECUTE, {"requests": reqs}, id=batch_id))
    if first:
        burst[0] = P.encode(P.EXECUTE, {"requests": [P.request(first)]}, id=next(iter(sizes)))
    model = write_model(tmp_path, BURST)
    assert host.handshake(model, settings=settings, then=tuple(burst), sent=(model / "go").touch)[
        "ok"
    ]
    frames: list[dict[str, Any]] = []
    while sum(len(f["body"]["responses"]) for f in frames) < sum(sizes.values()):
        f = host.recv(30.0)
        if f["type"] != "ARENA":
            assert f["type"] == "RESPONSES", f["type"]
            frames.append(f)
    return frames


def test_a_burst_of_sync_batches_is_answered_together(host: StubHost, tmp_path: Path) -> None:
    """Quick sync batches read together (sent while the stub was busy) are
    answered in one RESPONSES frame, each ending with a BATCH_END entry,
    in the order they came; answers past a frame's size go on in the next
    frame, still in order."""
    sizes = {2: 1, 3: 60, 4: 2, 5: 60}  # answers of 1.6 KB: 123 fill two frames
    frames = _burst(host, tmp_path, sizes)
    assert [(f["id"], f["flags"]) for f in frames] == [(0, 0), (0, 0)]
    entries = [e for f in frames for e in f["body"]["responses"]]
    order = [(e["batch_id"], e["request_index"]) for e in entries]
    assert order == [(b, i) for b, n in sizes.items() for i in range(n)]
    ends = [
        (e["batch_id"], e["request_index"])
        for e in entries
        if e["response_flags"] & P.RESP_BATCH_END
    ]
    assert ends == [(b, n - 1) for b, n in sizes.items()]
    last = np.frombuffer(host.tensor_bytes(entries[-1]["outputs"][1]), np.float32)
    assert (last == 559).all()
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r7")]}, id=6))
    alone = host.recv(30.0)
    assert alone["id"] == 6 and alone["flags"] & P.FLAG_BATCH_DONE, "a lone batch: its own frame"


@pytest.mark.parametrize("why", ["execute timeout", "slow batch"])
def test_answers_do_not_wait_for_other_batches(host: StubHost, tmp_path: Path, why: str) -> None:
    """With an execute timeout (the backend times each batch by its answer),
    or after a batch that took long (answers made would wait for the next
    one), every batch of a burst is answered as soon as it returns."""
    sizes = {2: 1, 3: 3, 4: 2}
    if why == "execute timeout":
        frames = _burst(host, tmp_path, sizes, execute_timeout_seconds=1.5)
    else:
        frames = _burst(host, tmp_path, sizes, first="slow")
    batches = [sorted({e["batch_id"] for e in f["body"]["responses"]}) for f in frames]
    assert batches == [[b] for b in sizes], "one frame per batch"


def test_one_batch_of_a_few_ms_does_not_stop_answers_waiting(
    host: StubHost, tmp_path: Path
) -> None:
    """A batch that took a few milliseconds once (as a quick one preempted
    on a busy machine does) is answered at once, and the quick batches read
    after it still wait for each other: one frame for them."""
    sizes = {2: 1, 3: 3, 4: 2, 5: 1}
    frames = _burst(host, tmp_path, sizes, first="5ms")
    batches = [sorted({e["batch_id"] for e in f["body"]["responses"]}) for f in frames]
    assert batches == [[2], [3, 4, 5]]


def test_init_failure_reports_traceback(host: StubHost, tmp_path: Path) -> None:
    res = host.load(
        tmp_path,
        """
        class TritonPythonModel:
            def initialize(self, args):
                raise RuntimeError("no weights here")
    """,
    )
    assert res["ok"] is False
    assert "no weights here" in res["error"] and "Traceback" in res["error"]
    assert "'m'" in res["error"]


@pytest.mark.parametrize(
    "kind,exc",
    [
        ("def", e)
        for e in ("ValueError", "SystemExit", "KeyboardInterrupt", "asyncio.CancelledError")
    ]
    + [("async def", e) for e in ("ValueError", "SystemExit", "KeyboardInterrupt")],
)
def test_execute_raising_fails_the_batch_and_serves_on(
    host: StubHost, tmp_path: Path, kind: str, exc: str
) -> None:
    """Whatever execute() raises, BaseException included, fails its batch
    only (asyncio lets SystemExit and KeyboardInterrupt out of the loop:
    the stub runs its loop on)."""
    host.load(
        tmp_path,
        f"""
        import asyncio
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            {kind} execute(self, requests):
                if requests[0].request_id() == "boom":
                    raise {exc}("exploded")
                return [pb_utils.InferenceResponse([]) for _ in requests]
    """,
    )
    reply = host.execute(1, [P.request("boom")])
    assert reply["type"] == "EXECUTE_DONE" and reply["body"]["ok"] == 0
    error = reply["body"]["error"]
    assert "exploded" in error and exc.split(".")[-1] in error, error
    reply = host.execute(2, [P.request("fine")])
    assert reply["type"] == "RESPONSES"


@pytest.mark.parametrize(
    "body,needle",
    [
        (
            "return [pb_utils.InferenceResponse([])]",
            "Number of InferenceResponse objects do not match the number of InferenceRequest "
            "objects. InferenceRequest(s) size is:2, and InferenceResponse(s) size is:1",
        ),
        (
            "return [pb_utils.InferenceResponse([]), 'x']",
            "Expected an 'InferenceResponse' object in the execute function return list, "
            "found type '<class 'str'>'.",
        ),
        ("return {}", "Expected a list in the execute return, found type '<class 'dict'>'."),
        (
            "requests[1].set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)\n"
            "                return [None, pb_utils.InferenceResponse([])]",
            "Expected a None object in the execute function return list for reschduled "
            "request, found type '<class 'tritonpy.pb_utils._response.InferenceResponse'>'.",
        ),
        (
            "s = requests[0].get_response_sender()\n"
            "                s.send(pb_utils.InferenceResponse([]))\n"
            "                return [pb_utils.InferenceResponse([]), None]",
            "Unable to send response. Non-decoupled model cannot send more than one response.",
        ),
    ],
)
def test_bad_execute_results_fail_the_whole_batch(
    host: StubHost, tmp_path: Path, body: str, needle: str
) -> None:
    host.load(
        tmp_path,
        f"""
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                {body}
    """,
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("a"), P.request("b")]}, id=1))
    done = host.entries(lambda got: any("execute_done" in e for e in got))[-1]
    assert done["ok"] == 0
    assert done["error"] == f"Failed to process the request(s) for model 't_0', message: {needle}"


def test_no_response_and_no_sender_fails_that_request(host: StubHost, tmp_path: Path) -> None:
    """execute() returned None for a request whose sender it never took:
    nothing can answer it any more, so it fails at once (the official
    backend leaves its client waiting); a request whose sender was taken
    stays open."""
    host.load(
        tmp_path,
        """
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                self.kept = requests[1].get_response_sender()
                return None
    """,
    )
    reply = host.execute(1, [P.request("lost"), P.request("kept")])
    assert reply["flags"] == P.FLAG_BATCH_DONE
    (entry,) = reply["body"]["responses"]
    assert entry["request_index"] == 0 and entry["response_flags"] & P.RESP_FINAL
    assert entry["error_message"].startswith(
        "Failed to process the request(s) for model 't_0', message: tritonpy: execute() "
        "returned no response for request 'lost'"
    )


def test_bad_output_fails_only_its_request(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                out = []
                for r in requests:
                    if r.request_id() == "bad":
                        t = pb_utils.Tensor("OUT", np.array([1, "x", None], dtype=object))
                    else:
                        t = pb_utils.Tensor("OUT", np.array([1, 2], np.int32))
                    out.append(pb_utils.InferenceResponse([t]))
                return out
    """,
    )
    reply = host.execute(1, [P.request("good"), P.request("bad")])
    good, bad = reply["body"]["responses"]
    assert not good["has_error"] and good["outputs"][0]["name"] == "OUT"
    assert bad["has_error"] and bad["error_code"] == 3
    assert "request 'bad'" in bad["error_message"] and "'OUT'" in bad["error_message"]


def test_error_response_keeps_code(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                err = pb_utils.TritonError("not here", pb_utils.TritonError.NOT_FOUND)
                return [pb_utils.InferenceResponse(error=err) for _ in requests]
    """,
    )
    resp = host.execute(1, [P.request("x")])["body"]["responses"][0]
    assert resp["has_error"] and resp["error_code"] == 2 and resp["error_message"] == "not here"


def test_async_execute_is_awaited(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import asyncio
        import numpy as np
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            async def execute(self, requests):
                await asyncio.sleep(0.01)
                return [pb_utils.InferenceResponse([pb_utils.Tensor("O", np.ones(2, np.int32))])
                        for _ in requests]
    """,
    )
    resp = host.execute(1, [P.request("x")])["body"]["responses"][0]
    assert host.tensor_bytes(resp["outputs"][0]) == struct.pack("<2i", 1, 1)


def test_multi_file_model_and_custom_filename(host: StubHost, tmp_path: Path) -> None:
    d = write_model(
        tmp_path,
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils
        from helpers import VALUE
        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("O", np.array([VALUE]))])
                        for _ in requests]
    """,
        name="custom.py",
    )
    (d / "helpers.py").write_text("VALUE = 41 + 1\n")
    assert host.handshake(d, model_file="custom.py")["ok"] is True
    resp = host.execute(1, [P.request("x")])["body"]["responses"][0]
    assert np.frombuffer(host.tensor_bytes(resp["outputs"][0]), np.int64)[0] == 42


def test_finalize_then_exit_zero(host: StubHost, tmp_path: Path) -> None:
    d = write_model(
        tmp_path,
        """
        import os
        class TritonPythonModel:
            def initialize(self, args):
                self.flag = os.path.join(os.path.dirname(__file__), "finalized")
            def execute(self, requests):
                return []
            def finalize(self):
                open(self.flag, "w").close()
    """,
    )
    assert host.handshake(d)["ok"] is True
    host.send(P.encode(P.FINALIZE, {}))
    assert host.recv_type("FINALIZE_DONE")["body"]["json"] == {"ok": True}
    assert host.wait() == 0
    assert (d / "finalized").exists()


def test_eof_makes_the_stub_leave_at_once(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, ADD_SUB)
    host.sock.close()
    # The test process (its parent) lives on: only the EOF can end the stub.
    assert host.wait(30) == 0


def test_message_longer_than_a_frame_is_a_protocol_error(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, ADD_SUB)
    host.send(b"X" * (P.MAX_FRAME + 1))
    message = host.recv_type("ERROR")["body"]["message"]
    assert message.startswith("protocol error: a message of more than")
    assert host.wait(30) == 70


def test_message_with_too_many_descriptors_is_a_protocol_error(
    host: StubHost, tmp_path: Path
) -> None:
    host.load(tmp_path, ADD_SUB)
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(40)]
    try:
        host.send(P.encode(P.IS_READY, {}, id=1), tuple(fds))
    finally:
        for fd in fds:
            os.close(fd)
    message = host.recv_type("ERROR")["body"]["message"]
    assert "too many descriptors" in message
    assert host.wait(30) == 70


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00" * 10,
        b"XXXX" + bytes(40),
        P.encode(P.EXECUTE, {"requests": []}, id=1)[:-1] + b"",
    ],
    ids=["short", "magic", "badlen"],
)
def test_garbage_gets_an_error_frame_and_exit(
    host: StubHost, tmp_path: Path, garbage: bytes
) -> None:
    host.load(tmp_path, ADD_SUB)
    frame = bytearray(garbage)
    host.send(bytes(frame))
    reply = host.recv_type("ERROR")
    assert "protocol error" in reply["body"]["message"]
    assert host.wait(30) == 70


def test_forged_arena_offsets_are_rejected(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, ADD_SUB)
    host.new_arena(1, 1 << 16)
    req = P.request("x", [P.Tensor("A", FP32, [1 << 20], 4 << 20, 1, b"", 1, 0).to_json()])
    host.send(P.encode(P.EXECUTE, {"requests": [req]}, id=1))
    reply = host.recv_type("ERROR")
    assert "outside backend arena 1" in reply["body"]["message"]
    assert host.wait(30) == 70


def _pipe_end() -> int:
    r, w = os.pipe()
    os.close(w)
    return r


def _memfd(size: int, seals: int) -> int:
    fd = os.memfd_create("host-bad", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_pipe_end, "not a memfd on tmpfs"),
        (lambda: _memfd(1 << 16, 0), "not sealed against shrinking"),
        (lambda: _memfd(4096, fcntl.F_SEAL_SHRINK), "the memfd has 4096"),
    ],
    ids=["pipe", "unsealed", "short"],
)
def test_a_bad_backend_arena_is_refused(
    host: StubHost, tmp_path: Path, make: Callable[[], int], says: str
) -> None:
    """The stub maps only tmpfs memfds sealed against shrinking, at least
    as long as announced (the seals read before the size)."""
    host.load(tmp_path, ADD_SUB)
    fd = make()
    try:
        host.send(P.encode(P.ARENA, {"arena_id": 1, "size": 1 << 16}), (fd,))
    finally:
        os.close(fd)
    assert says in host.recv_type("ERROR")["body"]["message"]
    assert host.wait(30) == 70


SIZED = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.ones(n, np.uint8))]))
        return out
"""


def test_outputs_past_the_backends_arena_limits_fail_and_the_stub_serves_on(
    host: StubHost, tmp_path: Path
) -> None:
    """With the backend's stub-max-arena-bytes in INIT, the stub makes an
    arena of just the size needed when twice it would not fit, and fails an
    output that would pass the limit instead of announcing it (which would
    get it killed)."""
    host.load(
        tmp_path,
        SIZED,
        settings={"stub_max_arenas": 4, "stub_max_arena_bytes": 96 << 20},
    )

    def ask(batch_id: int, n: int) -> dict[str, Any]:
        size = P.inline("N", 9, [1], struct.pack("<q", n))
        reply = host.execute(batch_id, [P.request("r", [size])])
        return reply["body"]["responses"][0]

    fits = ask(1, 80 << 20)  # an arena of 160 MiB would not: one of 80 MiB
    assert not fits["has_error"] and fits["outputs"][0]["byte_size"] == 80 << 20
    assert [a.size() for a in host.stub_arenas.values()] == [80 << 20]
    past = ask(2, 20 << 20)  # 80 MiB in use: no room for 20 more
    assert past["has_error"], past
    # The official backend's text when its pool cannot grow, then tritonpy's.
    assert "Failed to increase the shared memory pool size: tritonpy:" in past["error_message"]
    assert "stub-max-arena-bytes=100663296" in past["error_message"]
    assert not ask(3, 8)["has_error"]


def test_descriptors_on_a_non_arena_frame_are_rejected(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, ADD_SUB)
    r, w = os.pipe()
    try:
        host.send(P.encode(P.EXECUTE, {"requests": []}, id=1), (r,))
    finally:
        os.close(r)
        os.close(w)
    assert "descriptors" in host.recv_type("ERROR")["body"]["message"]


def test_sigint_is_ignored(host: StubHost, tmp_path: Path) -> None:
    """Ctrl-C reaches the whole foreground process group; the server, not the
    stub, decides when the stub goes."""
    host.load(tmp_path, ADD_SUB)
    host.proc.send_signal(signal.SIGINT)
    reply = host.execute(1, [P.request("r", [f32("A", [1]), f32("B", [1])])])
    assert reply["type"] == "RESPONSES"


def test_strings_round_trip(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                out = []
                for r in requests:
                    s = pb_utils.get_input_tensor_by_name(r, "S").as_numpy()
                    out.append(pb_utils.InferenceResponse([pb_utils.Tensor(
                        "S", np.array([x[::-1] for x in s], dtype=object))]))
                return out
    """,
    )
    words = [b"hello", b"", "h\u00e9".encode()]
    data = b"".join(struct.pack("<I", len(w)) + w for w in words)
    resp = host.execute(1, [P.request("s", [P.inline("S", BYTES, [3], data)])])
    out = resp["body"]["responses"][0]["outputs"][0]
    want = b"".join(struct.pack("<I", len(w)) + w[::-1] for w in words)
    assert out["dtype"] == BYTES and host.tensor_bytes(out) == want


def test_protocol_json_is_compact(tmp_path: Path) -> None:
    """HELLO is JSON with the documented keys."""
    h = StubHost()
    try:
        hello = h.recv_type("HELLO")["body"]["json"]
        assert set(hello) >= {"protocol", "pid", "python", "executable"}
        assert hello["pid"] == h.proc.pid
        json.dumps(hello)
    finally:
        h.close()


FILL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.kept = None

    def execute(self, requests):
        out = []
        for r in requests:
            n, value, keep = (
                int(pb_utils.get_input_tensor_by_name(r, k).as_numpy()[0])
                for k in ("N", "VALUE", "KEEP")
            )
            if keep == 2:  # send back what was kept, unchanged
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", self.kept)]))
                continue
            if keep == 3:  # let go of it
                self.kept = None
            t = pb_utils.Tensor.empty("OUT", [n], np.float32)
            a = t.as_numpy()
            a[:] = value
            if keep == 1:
                self.kept = a
            out.append(pb_utils.InferenceResponse([t, pb_utils.Tensor("TAIL", a[n // 2 :])]))
        return out
"""


def _fill(host: StubHost, batch_id: int, n: int, value: int, keep: int = 0) -> list[dict]:
    i32 = [
        P.inline(k, INT32, [1], struct.pack("<i", v))
        for k, v in (("N", n), ("VALUE", value), ("KEEP", keep))
    ]
    reply = host.execute(batch_id, [P.request(f"r{batch_id}", i32)])
    (resp,) = reply["body"]["responses"]
    assert not resp["has_error"], resp
    return resp["outputs"]


def _place(outs: list[dict]) -> tuple[int, int]:
    return outs[0]["arena_id"], outs[0]["offset"]


def _release(host: StubHost, outs: list[dict]) -> None:
    refs = [{"arena_id": t["arena_id"], "offset": t["offset"]} for t in outs]
    host.send(P.encode(P.RELEASE, {"allocations": refs}))


def test_tensor_empty_is_sent_from_shared_memory_without_a_copy(
    host: StubHost, tmp_path: Path
) -> None:
    """A model fills pb_utils.Tensor.empty in place; the stub sends those
    bytes by reference (a view of it too, at its offset inside the block),
    and the block is free again once the model dropped it and the backend
    released the frame."""
    host.load(tmp_path, FILL)
    n = 1 << 18  # 1 MiB of float32
    outs = _fill(host, 1, n, 7)
    out, tail = outs
    assert out["location"] == tail["location"] == 1
    assert tail["arena_id"] == out["arena_id"]
    assert tail["offset"] == out["offset"] + 4 * (n // 2)  # the same bytes, not a copy
    assert (np.frombuffer(host.tensor_bytes(out), np.float32) == 7).all()
    assert np.frombuffer(host.tensor_bytes(tail), np.float32).size == n - n // 2
    _release(host, outs)
    # The model kept nothing: the next block takes the same place.
    again = _fill(host, 2, n, 8)
    assert _place(again) == _place(outs)
    assert (np.frombuffer(host.tensor_bytes(again[0]), np.float32) == 8).all()


def test_a_dropped_tensor_empty_stays_reserved_until_released(
    host: StubHost, tmp_path: Path
) -> None:
    """The model's array is gone once execute returns, but the backend may
    not have read the block yet: the next block must go elsewhere until
    the release comes. A second release of it is a protocol error (the
    space could be in use again), as for any unknown allocation."""
    host.load(tmp_path, FILL)
    n = 1 << 18
    first = _fill(host, 1, n, 1)
    second = _fill(host, 2, n, 2)  # first's array is dead, its frame not released
    assert _place(second) != _place(first)
    assert (np.frombuffer(host.tensor_bytes(first[0]), np.float32) == 1).all()
    _release(host, first)
    _release(host, second)
    third = _fill(host, 3, n, 3)
    assert _place(third) == _place(first)
    _release(host, third)
    _release(host, third[:1])
    assert "no live allocation" in host.recv_type("ERROR")["body"]["message"]
    assert host.wait(30) == 70


def test_a_second_release_of_a_kept_tensor_empty_is_refused(host: StubHost, tmp_path: Path) -> None:
    """The model still holds the block: a release with no reference out
    must not free it under the model's array (a protocol error instead)."""
    host.load(tmp_path, FILL)
    first = _fill(host, 1, 1 << 18, 1, keep=1)
    _release(host, first)
    _release(host, first[:1])
    assert "was not sent" in host.recv_type("ERROR")["body"]["message"]
    assert host.wait(30) == 70


def test_a_kept_tensor_empty_survives_its_release(host: StubHost, tmp_path: Path) -> None:
    """The backend's RELEASE does not free a block the model still holds:
    the next block goes elsewhere, and the kept array, sent again later,
    still has its values and its place. Once the model lets go of it
    (after the release), its place is taken by the next block."""
    host.load(tmp_path, FILL)
    n = 1 << 18
    first = _fill(host, 1, n, 1, keep=1)
    _release(host, first)
    second = _fill(host, 2, n, 2)
    assert _place(second) != _place(first)
    _release(host, second)
    third = _fill(host, 3, n, 0, keep=2)
    assert _place(third) == _place(first)
    assert (np.frombuffer(host.tensor_bytes(third[0]), np.float32) == 1).all()
    _release(host, third)
    fourth = _fill(host, 4, n, 4, keep=3)
    assert _place(fourth) == _place(first)
    assert (np.frombuffer(host.tensor_bytes(fourth[0]), np.float32) == 4).all()
