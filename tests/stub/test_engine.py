# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The engine over the real protocol: async concurrency, decoupled senders,
cancellation, rescheduling, readiness and unloading with work in flight."""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import pytest

import protocol_ref as P
from host import StubHost, write_model

INT32 = 8
FINAL, RESCHEDULE, NO_RESPONSE = P.RESP_FINAL, P.RESP_RESCHEDULE, P.RESP_NO_RESPONSE


def i32(name: str, v: int) -> dict:
    return P.inline(name, INT32, [1], struct.pack("<i", v))


def value(host: StubHost, entry: dict[str, Any]) -> int:
    return struct.unpack("<i", host.tensor_bytes(entry["outputs"][0]))[0]


def finals(n: int) -> Any:
    return lambda got: sum(1 for e in got if e.get("response_flags", 0) & FINAL) >= n


GARBAGE_COUNTER = """
import gc
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def initialize(self, args):
        gc.disable()
    def execute(self, requests):
        found = gc.collect()  # what the batches before this one left to the collector
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([found], np.int32))])
                for r in requests]
"""


def test_a_batch_leaves_no_reference_cycles(host: StubHost, tmp_path: Path) -> None:
    """Requests, their batch and their senders are freed by reference
    counting when the batch ends, not left for the cyclic collector."""
    host.load(tmp_path, GARBAGE_COUNTER)
    found = []
    for b in range(1, 7):
        reply = host.execute(
            b, [P.request(f"r{b}", [i32("IN", b)]), P.request("x", [i32("IN", 0)])]
        )
        found.append(value(host, reply["body"]["responses"][0]))
    assert found[2:] == [0, 0, 0, 0], f"objects left to the cyclic collector per batch: {found}"


# Each batch waits (up to 30 s) until all 20 have started, and answers how
# many had started: 20 from every batch only if they ran at the same time.
ASYNC_MEET = """
import asyncio
import time
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def initialize(self, args):
        self.started = 0
    async def execute(self, requests):
        self.started += 1
        deadline = time.monotonic() + 30
        while self.started < 20 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([self.started], np.int32))])
                for r in requests]
"""


def test_async_batches_run_concurrently(host: StubHost, tmp_path: Path) -> None:
    done = host.load(tmp_path, ASYNC_MEET)
    assert done["execute"] == "async"
    for b in range(20):
        host.send(P.encode(P.EXECUTE, {"requests": [P.request(f"r{b}", [i32("IN", b)])]}, id=b + 1))
    got = host.entries(lambda g: sum("batch_done" in e for e in g) == 20, timeout=120)
    started = {e["batch_id"]: value(host, e) for e in got if "batch_id" in e}
    assert started == {b + 1: 20 for b in range(20)}, (
        f"batches started before each ended: {started}"
    )


DECOUPLED_REPEAT = """
import threading, asyncio
import numpy as np
import triton_python_backend_utils as pb_utils
FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            n = int(r.inputs()[0].as_numpy()[0])
            sender = r.get_response_sender()
            mode = r.request_id()
            if mode == "thread":
                def work(sender=sender, n=n):
                    for i in range(n):
                        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))]))
                    sender.send(flags=FINAL)
                threading.Thread(target=work).start()
            elif mode == "zero":
                sender.send(flags=FINAL)
            else:
                for i in range(n):
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))]),
                                flags=FINAL if i == n - 1 else 0)
        return None
"""


def test_decoupled_inline_sends_are_coalesced(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, DECOUPLED_REPEAT, settings={"decoupled": True})
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("inline", [i32("N", 5)])]}, id=1))
    frames = []
    while len(frames) < 2:
        frames.append(host.recv())
    responses, done = frames
    assert responses["type"] == "RESPONSES" and len(responses["body"]["responses"]) == 5, (
        "five sends in one execute() must leave as one frame"
    )
    entries = responses["body"]["responses"]
    assert [value(host, e) for e in entries] == [0, 1, 2, 3, 4]
    assert [e["response_flags"] for e in entries] == [0, 0, 0, 0, FINAL]
    assert done["type"] == "EXECUTE_DONE" and done["body"]["ok"] == 1


def test_decoupled_thread_after_execute_returned(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, DECOUPLED_REPEAT, settings={"decoupled": True})
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("thread", [i32("N", 50)])]}, id=3))
    got = host.entries(finals(1))
    tokens = [value(host, e) for e in got if e.get("outputs")]
    assert tokens == list(range(50))
    assert any(e.get("execute_done") == 3 for e in got) or host.recv()["type"] == "EXECUTE_DONE"


def test_decoupled_zero_responses(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, DECOUPLED_REPEAT, settings={"decoupled": True})
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("zero", [i32("N", 0)])]}, id=4))
    got = host.entries(lambda g: any("execute_done" in e for e in g))
    (entry,) = [e for e in got if "batch_id" in e]
    assert entry["response_flags"] == FINAL | NO_RESPONSE


def test_decoupled_execute_returning_a_list_is_an_error(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse([]) for _ in requests]
    """,
        settings={"decoupled": True},
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("x")]}, id=1))
    done = host.recv_type("EXECUTE_DONE")
    assert done["body"]["ok"] == 0 and "must return None" in done["body"]["error"]


def test_send_after_final_raises_and_harms_nothing(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils
        FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        class TritonPythonModel:
            def execute(self, requests):
                s = requests[0].get_response_sender()
                s.send(flags=FINAL)
                try:
                    s.send(pb_utils.InferenceResponse([]))
                except pb_utils.TritonModelException as e:
                    msg = str(e)
                s2 = requests[1].get_response_sender()
                s2.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([len(msg)], np.int32))]),
                        flags=FINAL)
    """,
        settings={"decoupled": True},
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("a"), P.request("b")]}, id=1))
    got = host.entries(lambda g: any("execute_done" in e for e in g))
    flags = {e["request_index"]: e["response_flags"] for e in got if "batch_id" in e}
    assert flags == {0: FINAL | NO_RESPONSE, 1: FINAL}
    assert got[-1]["ok"] == 1


def test_default_mode_answer_through_the_sender(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils
        FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        class TritonPythonModel:
            def execute(self, requests):
                for r in requests:
                    r.get_response_sender().send(
                        pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([5], np.int32))]),
                        flags=FINAL)
                return None
    """,
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("a"), P.request("b")]}, id=1))
    got = host.entries(lambda g: any("execute_done" in e for e in g))
    answers = [e for e in got if "batch_id" in e]
    assert [(e["request_index"], e["response_flags"]) for e in answers] == [(0, FINAL), (1, FINAL)]
    assert [value(host, e) for e in answers] == [5, 5]
    assert got[-1] == {"execute_done": 1, "ok": 1, "error": ""}


# Default mode, answered through senders after execute() returned: a thread
# (sync execute) or a task (async) sends what MODE says once the test has
# seen the batch end (it then makes the file "go" beside the model).
LATE_SENDER = """
import asyncio
import os
import threading
import time
import numpy as np
import triton_python_backend_utils as pb_utils
FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
GO = os.path.join(os.path.dirname(__file__), "go")

def released():
    return os.path.exists(GO)

def wait_go():
    deadline = time.monotonic() + 60
    while not released() and time.monotonic() < deadline:
        time.sleep(0.005)

async def play_when_released(sender, mode):
    deadline = time.monotonic() + 60
    while not released() and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    play(sender, mode)

def out(v):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([v], np.int32))])

def play(sender, mode):
    steps = {"one_then_final": [(out(1), 0), (None, FINAL)],
             "final_first": [(None, FINAL)],
             "two": [(out(1), 0), (out(2), FINAL)],
             "after_final": [(out(1), FINAL), (out(2), 0)]}[mode]
    for response, flags in steps:
        try:
            sender.send(response, flags=flags)
        except pb_utils.TritonModelException as e:
            pb_utils.Logger.log_info(f"send raised: {e}")

class TritonPythonModel:
    {kind} execute(self, requests):
        for r in requests:
            sender, mode = r.get_response_sender(), r.request_id()
            {spawn}
        return None
"""
THREAD = (
    "def",
    "threading.Thread(target=lambda s=sender, m=mode: (wait_go(), play(s, m))).start()",
)
TASK = (
    "async def",
    "asyncio.get_running_loop().create_task(play_when_released(sender, mode))",
)


@pytest.mark.parametrize("kind,spawn", [THREAD, TASK], ids=["thread", "task"])
def test_default_mode_late_answers_follow_the_one_response_rule(
    host: StubHost, tmp_path: Path, kind: str, spawn: str
) -> None:
    model = write_model(tmp_path, LATE_SENDER.replace("{kind}", kind).replace("{spawn}", spawn))
    host.handshake(model)
    modes = ["one_then_final", "final_first", "two", "after_final"]
    host.send(P.encode(P.EXECUTE, {"requests": [P.request(m) for m in modes]}, id=3))
    # execute() returned first: its batch ended with no entry.
    got = host.entries(lambda g: len(g) >= 1, timeout=30)
    assert got in ([{"batch_done": 3}], [{"execute_done": 3, "ok": 1, "error": ""}])
    (model / "go").touch()
    got += host.entries(
        lambda g: sum(1 for e in g if e.get("response_flags", 0) & FINAL) == 4, timeout=30
    )
    by_request: dict[str, list[Any]] = {m: [] for m in modes}
    for e in got[1:]:
        by_request[modes[e["request_index"]]].append(e)
    one, final = by_request["one_then_final"]
    assert one["response_flags"] == 0 and value(host, one) == 1
    assert final["response_flags"] == FINAL | NO_RESPONSE
    (err,) = by_request["final_first"]
    assert err["response_flags"] == FINAL and err["error_code"] == 1
    assert err["error_message"].startswith(
        "Failed to process the request(s) for model 't_0', message: TritonModelException: "
        "Unable to send response. "
        "Non-decoupled model cannot send complete final before sending a response."
    )
    first, second = by_request["two"]
    assert first["response_flags"] == 0 and value(host, first) == 1
    assert (
        second["response_flags"] == FINAL
        and "cannot send more than one response" in (second["error_message"])
    )
    (only,) = by_request["after_final"]
    assert only["response_flags"] == FINAL and value(host, only) == 1


CANCELLABLE = """
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils
FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
class TritonPythonModel:
    async def execute(self, requests):
        r = requests[0]
        sender = r.get_response_sender()
        try:
            i = 0
            while not r.is_cancelled():  # only a cancellation ends this
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))]))
                i += 1
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([-1], np.int32))]),
                        flags=FINAL)
            raise
"""


def test_cancel_wakes_the_task(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, CANCELLABLE, settings={"decoupled": True})
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("s", [])]}, id=9))
    host.entries(lambda g: len(g) >= 3, timeout=30)
    host.send(P.encode(P.CANCEL, {"requests": [{"batch_id": 9, "request_index": 0}]}))
    got = host.entries(lambda g: any("execute_done" in e for e in g), timeout=30)
    # -1 is sent only from the task's CancelledError: the cancel woke the
    # task in its sleep, not the loop's is_cancelled() check.
    last = [e for e in got if e.get("response_flags", 0) & FINAL]
    assert len(last) == 1 and value(host, last[0]) == -1
    # Nothing follows the final response.
    host.nothing_more()


def test_cancel_without_handler_ends_with_cancelled(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import asyncio
        class TritonPythonModel:
            async def execute(self, requests):
                await asyncio.sleep(60)
    """,
        settings={"decoupled": True},
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("s", [])]}, id=2))
    host.send(P.encode(P.CANCEL, {"requests": [{"batch_id": 2, "request_index": 0}]}))
    got = host.entries(lambda g: any("execute_done" in e for e in g), timeout=30)
    (entry,) = [e for e in got if "batch_id" in e]
    assert entry["has_error"] and entry["error_code"] == 7 and "cancelled" in entry["error_message"]


@pytest.mark.parametrize("decoupled", [False, True])
def test_a_cancellation_from_inside_the_model_is_an_error(
    host: StubHost, tmp_path: Path, decoupled: bool
) -> None:
    """Nobody cancelled the request: an async execute that ends in
    CancelledError of its own (an awaited task was cancelled) fails it with
    an error naming the model and the exception, not as 'cancelled'."""
    host.load(
        tmp_path,
        """
        import asyncio
        class TritonPythonModel:
            async def execute(self, requests):
                helper = asyncio.get_running_loop().create_task(asyncio.sleep(60))
                asyncio.get_running_loop().call_later(0.01, helper.cancel)
                await helper
    """,
        settings={"decoupled": decoupled},
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("mine", [])]}, id=3))
    got = host.entries(lambda g: any("execute_done" in e or "batch_done" in e for e in g), 30)
    errors = [e for e in got if e.get("has_error")]
    done = [e for e in got if "execute_done" in e and e["ok"] == 0]
    message = errors[0]["error_message"] if errors else done[0]["error"]
    assert "model 'm'" in message and "'mine'" in message and "CancelledError" in message
    assert not errors or errors[0]["error_code"] != 7  # not CANCELLED


def test_wait_cancelled_and_callbacks(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import asyncio
        import numpy as np
        import triton_python_backend_utils as pb_utils
        FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        class TritonPythonModel:
            async def execute(self, requests):
                r = requests[0]
                seen = []
                r.add_cancel_callback(lambda req: seen.append(req.request_id()))
                r.get_response_sender().send(  # waiting now
                    pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([-1], np.int32))]))
                await r.wait_cancelled()
                await asyncio.sleep(0)
                r.get_response_sender().send(
                    pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([len(seen)], np.int32))]),
                    flags=FINAL)
    """,
        settings={"decoupled": True},
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("w", []), P.request("v", [])]}, id=5))
    (waiting,) = host.entries(lambda g: len(g) >= 1, timeout=30)
    assert waiting["response_flags"] == 0 and value(host, waiting) == -1
    host.send(P.encode(P.CANCEL, {"requests": [{"batch_id": 5, "request_index": 0}]}))
    got = host.entries(finals(1), timeout=30)
    final = [e for e in got if e.get("response_flags", 0) & FINAL]
    assert value(host, final[0]) == 1


def test_reschedule_in_decoupled_mode(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                for r in requests:
                    r.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                return None
    """,
        settings={"decoupled": True},
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("a")]}, id=1))
    got = host.entries(lambda g: any("execute_done" in e for e in g))
    (entry,) = [e for e in got if "batch_id" in e]
    assert entry["response_flags"] == RESCHEDULE | NO_RESPONSE


def test_reschedule_in_default_mode(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                out = []
                for r in requests:
                    if r.request_id() == "again":
                        r.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                        out.append(None)
                    else:
                        out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], np.int32))]))
                return out
    """,
    )
    reply = host.execute(1, [P.request("again"), P.request("done")])
    flags = [e["response_flags"] for e in reply["body"]["responses"]]
    assert flags == [RESCHEDULE | NO_RESPONSE, FINAL]


@pytest.mark.parametrize(
    "source,ready,needle",
    [
        ("def is_ready(self):\n        return True", 1, ""),
        ("def is_ready(self):\n        return False", 0, "returned False"),
        ("async def is_ready(self):\n        return True", 1, ""),
        ("def is_ready(self):\n        raise RuntimeError('disk gone')", 0, "disk gone"),
    ],
)
def test_is_ready(host: StubHost, tmp_path: Path, source: str, ready: int, needle: str) -> None:
    done = host.load(
        tmp_path,
        f"""
class TritonPythonModel:
    def execute(self, requests):
        return []
    {source}
""",
    )
    assert done["is_ready"] is True
    host.send(P.encode(P.IS_READY, {}, id=77))
    reply = host.recv_type("READY")
    assert reply["id"] == 77 and reply["body"]["ready"] == ready
    assert needle in reply["body"]["message"]


def test_unload_with_streams_in_flight(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import asyncio
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            async def execute(self, requests):
                requests[0].get_response_sender().send(pb_utils.InferenceResponse([]))
                await asyncio.Event().wait()  # never set: only the unload ends it
    """,
        settings={"decoupled": True, "finalize_grace_seconds": 0.3},
    )
    for b in range(3):
        host.send(P.encode(P.EXECUTE, {"requests": [P.request(f"s{b}")]}, id=b + 1))
    host.entries(lambda g: len(g) == 3, timeout=30)  # all three are running
    start = time.monotonic()
    host.send(P.encode(P.FINALIZE, {}))
    got = []
    while True:
        f = host.recv(30)
        if f["type"] == "FINALIZE_DONE":
            break
        got.append(f)
    # A lower bound only (a busy machine makes it longer): the grace was
    # waited before the streams were ended.
    assert time.monotonic() - start > 0.25
    errors = [e for f in got if f["type"] == "RESPONSES" for e in f["body"]["responses"]]
    assert len(errors) == 3 and all(e["error_code"] in (4, 7) for e in errors)
    assert host.wait(30) == 0


def test_send_error_surfaces_on_next_send(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        import asyncio
        import time
        import numpy as np
        import triton_python_backend_utils as pb_utils
        FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        class TritonPythonModel:
            async def execute(self, requests):
                s = requests[0].get_response_sender()
                s.send(pb_utils.InferenceResponse([]))
                # Sends go through until the stub has read the SEND_ERROR:
                # the first send after it raises.
                code = 0
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                    try:
                        s.send(pb_utils.InferenceResponse([]))
                    except pb_utils.TritonModelException as e:
                        code = 1 if "gone away" in str(e) else 2
                        break
                s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([code], np.int32))]),
                       flags=FINAL)
    """,
        settings={"decoupled": True},
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("e")]}, id=1))
    host.entries(lambda g: len(g) >= 1)
    host.send(
        P.encode(
            P.SEND_ERROR,
            {
                "batch_id": 1,
                "request_index": 0,
                "error_code": 4,
                "message": "the client has gone away",
            },
        )
    )
    got = host.entries(finals(1))
    final = next(e for e in got if e.get("response_flags", 0) & FINAL)
    assert value(host, final) == 1


STRESS = """
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils
FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
class TritonPythonModel:
    async def execute(self, requests):
        r = requests[0]
        s = r.get_response_sender()
        n = int(r.inputs()[0].as_numpy()[0])
        for i in range(n):
            await asyncio.sleep(0)
            s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))]),
                   flags=FINAL if i == n - 1 else 0)
"""


def test_many_streams_every_token_in_order(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, STRESS, settings={"decoupled": True})
    streams, tokens = 128, 50
    for b in range(streams):
        host.send(
            P.encode(P.EXECUTE, {"requests": [P.request(f"s{b}", [i32("N", tokens)])]}, id=b + 1)
        )
    got = host.entries(finals(streams), timeout=30)
    per: dict[int, list[int]] = {}
    final_count: dict[int, int] = {}
    frames_entries = [e for e in got if "batch_id" in e]
    for e in frames_entries:
        per.setdefault(e["batch_id"], []).append(value(host, e))
        final_count[e["batch_id"]] = final_count.get(e["batch_id"], 0) + (
            e["response_flags"] & FINAL
        )
    assert len(per) == streams
    assert all(v == list(range(tokens)) for v in per.values())
    assert all(c == 1 for c in final_count.values())


def test_logger_reaches_the_backend_with_file_and_line(host: StubHost, tmp_path: Path) -> None:
    d = write_model(
        tmp_path,
        """
        import threading
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def initialize(self, args):
                pb_utils.Logger.log_info("hello from initialize")
            def execute(self, requests):
                pb_utils.Logger.log_warn("a warning")
                pb_utils.Logger.log_error("an error")
                pb_utils.Logger.log_verbose("only when verbose")
                pb_utils.Logger.log("explicit level", pb_utils.LogLevel.ERROR)
                t = threading.Thread(target=pb_utils.Logger.log_info, args=("from a thread",))
                t.start(); t.join()
                return [pb_utils.InferenceResponse([]) for _ in requests]
    """,
    )
    host.handshake(d)
    host.execute(1, [P.request("x")])
    host.send(P.encode(P.FINALIZE, {}))
    host.recv_type("FINALIZE_DONE")
    msgs = {m["message"]: m for m in host.logs}
    assert msgs["hello from initialize"]["level"] == 0
    assert msgs["hello from initialize"]["file"].endswith("model.py")
    assert msgs["hello from initialize"]["line"] == 6
    assert msgs["a warning"]["level"] == 1 and msgs["an error"]["level"] == 2
    assert msgs["explicit level"]["level"] == 2
    assert "from a thread" in msgs
    assert "only when verbose" not in msgs


def test_logger_verbose_when_the_server_is_verbose(host: StubHost, tmp_path: Path) -> None:
    d = write_model(
        tmp_path,
        """
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def initialize(self, args):
                pb_utils.Logger.log_verbose("chatty")
            def execute(self, requests):
                return []
    """,
    )
    host.handshake(d, log_levels=0b1111)
    host.send(P.encode(P.FINALIZE, {}))
    host.recv_type("FINALIZE_DONE")
    assert [m["level"] for m in host.logs if m["message"] == "chatty"] == [3]


def test_logger_follows_log_levels_sent_at_any_time(host: StubHost, tmp_path: Path) -> None:
    """LOG_LEVELS changes what the model's next log calls send; levels
    turned off send nothing at all."""
    d = write_model(
        tmp_path,
        """
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                tag = requests[0].request_id()
                pb_utils.Logger.log_info(f"{tag} info")
                pb_utils.Logger.log_warn(f"{tag} warning")
                pb_utils.Logger.log_error(f"{tag} error")
                pb_utils.Logger.log_verbose(f"{tag} verbose")
                return [pb_utils.InferenceResponse([]) for _ in requests]
            def finalize(self):
                pb_utils.Logger.log_verbose("finalize verbose")
    """,
    )
    host.handshake(d)
    host.execute(1, [P.request("a")])
    host.send(P.encode(P.LOG_LEVELS, {"enabled": 0b1010}))  # WARNING, VERBOSE
    host.execute(2, [P.request("b")])
    host.send(P.encode(P.LOG_LEVELS, {"enabled": 0b1000}))
    host.send(P.encode(P.FINALIZE, {}))
    host.recv_type("FINALIZE_DONE")
    assert [m["message"] for m in host.logs] == [
        "a info",
        "a warning",
        "a error",
        "b warning",
        "b verbose",
        "finalize verbose",
    ]
