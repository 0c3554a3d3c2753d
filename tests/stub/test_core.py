# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub's core without a process: frames in, frames out.

``Stub`` takes its I/O from ``make_channel``; here that is ``MemoryChannel``,
which hands the core the frames a test feeds (as one read of the socket)
and keeps the frames the core sends. The model runs in this process, on
the test's thread, which is the stub's loop thread. The real-process tests
(test_stub.py and the others) cover the socket, the process and threads.
"""

from __future__ import annotations

import asyncio
import gc
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tritonpy import pb_utils
from tritonpy.stub import _codec as C
from tritonpy.stub import _engine as engine
from tritonpy.stub.lifecycle import State, moved
from tritonpy.stub.runtime import Stub

import protocol_ref as P
from host import write_model

FP32 = 11


class MemoryChannel:
    """The channel's interface, with no socket: ``feed`` is one read."""

    def __init__(self, fd: int, loop: Any, on_eof: Any, on_violation: Any) -> None:
        self.on_eof = on_eof
        self.receiver: Any = None
        self.sent: list[tuple[bytes, tuple[int, ...]]] = []
        self.closed = False
        self.wants_write = False

    def start(self, receiver: Any) -> None:
        self.receiver = receiver

    def send(self, frame: bytes, fds: tuple[int, ...] = ()) -> None:
        if not self.closed:
            self.sent.append((bytes(frame), tuple(fds)))

    def flush_blocking(self, timeout: float = 5.0) -> int:
        return 0

    def close(self) -> None:
        self.closed = True

    def feed(self, *frames: bytes) -> None:
        """Hand ``frames`` over as the socket's channel does one read."""
        drained_wanted = False
        for i, frame in enumerate(frames):
            if self.receiver.on_frame(memoryview(bytearray(frame)), [], i < len(frames) - 1):
                drained_wanted = True
        if drained_wanted and not self.closed:
            self.receiver.drained()


class Core:
    """A stub over a MemoryChannel, and what it sent, decoded."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.stub = Stub(-1, "t_0", self.loop, make_channel=MemoryChannel)
        channel = self.stub.channel
        assert isinstance(channel, MemoryChannel)
        self.channel = channel
        # Frames reach the engine before start() too (a test of what the
        # stub does with a frame before HELLO); start() connects the same.
        channel.start(self.stub.engine)
        self.init_frames: list[dict[str, Any]] = []

    def feed(self, *frames: bytes) -> None:
        self.channel.feed(*frames)

    def spin(self, rounds: int = 5) -> None:
        """Let the loop run what was scheduled (flushes, tasks)."""
        for _ in range(rounds):
            try:
                self.loop.run_until_complete(asyncio.sleep(0))
            except RuntimeError:  # the stub stopped the loop: it is leaving
                assert self.stub.exit_code is not None
                return

    def sent(self) -> list[dict[str, Any]]:
        """The frames sent since the last call (LOG frames too), decoded;
        an ARENA frame carries its descriptors as ``fds``."""
        out = []
        for frame, fds in self.channel.sent:
            got = P.decode(frame)
            if fds:
                got["fds"] = fds
            out.append(got)
        self.channel.sent.clear()
        return out

    def types(self) -> list[str]:
        return [f["type"] for f in self.sent()]

    def init(
        self, model_dir: Path, settings: dict[str, Any] | None = None, *, greeted: bool = False
    ) -> dict[str, Any]:
        """INIT (after start() and HELLO unless ``greeted``); INIT_DONE's JSON."""
        if not greeted:
            self.stub.start()
            assert self.types() == ["HELLO"]
        args = {
            "model_config": '{"name": "m"}',
            "model_instance_kind": "CPU",
            "model_instance_name": "t_0",
            "model_instance_device_id": "0",
            "model_repository": str(model_dir.parent),
            "model_version": "1",
            "model_name": "m",
        }
        init = {
            "args": args,
            "model_file": str(model_dir / "model.py"),
            "model_dir": str(model_dir),
            "settings": settings or {},
        }
        self.feed(P.encode(P.INIT, {"json": init}))
        self.init_frames = self.sent()
        assert self.init_frames[-1]["type"] == "INIT_DONE"
        return self.init_frames[-1]["body"]["json"]

    def close(self) -> None:
        self.loop.close()


@pytest.fixture
def core(monkeypatch: pytest.MonkeyPatch) -> Iterator[Core]:
    # The stub attaches itself to pb_utils (module globals) and imports the
    # model into sys.modules: all put back after the test.
    saved = {
        name: dict(vars(module))
        for name, module in sys.modules.items()
        if name.startswith("tritonpy.pb_utils")
    }
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb_utils)
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules = set(sys.modules)
    c = Core()
    try:
        yield c
    finally:
        c.close()
        for name in set(sys.modules) - modules:
            del sys.modules[name]
        for name, values in saved.items():
            vars(sys.modules[name]).update(values)
        gc.unfreeze()


def fp32(name: str, values: list[float]) -> dict[str, Any]:
    return P.inline(name, FP32, [len(values)], struct.pack(f"<{len(values)}f", *values))


def execute(batch_id: int, *values: float) -> bytes:
    requests = [P.request(f"r{v}", [fp32("IN", [v])]) for v in values]
    return P.encode(P.EXECUTE, {"requests": requests}, id=batch_id)


ECHO = """
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_info("echo ready")
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy() * 2)])
                for r in requests]
"""


def outputs(frame: dict[str, Any]) -> dict[int, list[float]]:
    """Batch id -> the first output's values, of each entry of a RESPONSES frame."""
    got = {}
    for e in frame["body"]["responses"]:
        data = bytes.fromhex(e["outputs"][0]["data_hex"])
        got[e["batch_id"]] = list(struct.unpack(f"<{len(data) // 4}f", data))
    return got


# ---------------------------------------------------------------- life cycle


def test_init_moves_to_ready_and_logs_before_init_done(core: Core, tmp_path: Path) -> None:
    assert core.stub.state is State.STARTING
    done = core.init(write_model(tmp_path, ECHO))
    assert done == {"ok": True, "execute": "sync", "is_ready": False}
    assert [f["type"] for f in core.init_frames] == ["LOG", "INIT_DONE"]
    assert core.init_frames[0]["body"]["message"] == "echo ready"
    assert core.stub.state is State.READY


FAILING_INIT = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("no weights here")
    def execute(self, requests):
        return []
"""


def test_a_failed_init_refuses_execute(core: Core, tmp_path: Path) -> None:
    done = core.init(write_model(tmp_path, FAILING_INIT))
    assert done["ok"] is False and "no weights here" in done["error"]
    assert core.stub.state is State.FAILED
    core.feed(execute(1, 1.0))
    frames = core.sent()
    assert [f["type"] for f in frames] == ["ERROR"]
    assert "EXECUTE in state FAILED" in frames[0]["body"]["message"]


def test_execute_before_init_is_a_protocol_error(core: Core) -> None:
    core.feed(execute(1, 1.0))
    frames = core.sent()
    assert [f["type"] for f in frames] == ["ERROR"]
    assert "EXECUTE in state STARTING" in frames[0]["body"]["message"]
    assert core.channel.closed and core.stub.exit_code == 70
    assert core.stub.state is State.DONE


def test_auto_complete_after_init_is_a_protocol_error(core: Core, tmp_path: Path) -> None:
    core.init(write_model(tmp_path, ECHO))
    msg = {"model_name": "m", "config": "{}", "model_file": "x.py", "model_dir": "/x"}
    core.feed(P.encode(P.AUTO_COMPLETE, {"json": msg}))
    frames = core.sent()
    assert [f["type"] for f in frames] == ["ERROR"]
    assert "AUTO_COMPLETE in state READY" in frames[0]["body"]["message"]


def test_drain_then_finalize(core: Core, tmp_path: Path) -> None:
    core.init(write_model(tmp_path, ECHO), {"finalize_grace_seconds": 0.0})
    core.feed(P.encode(P.DRAIN, {}))
    assert core.stub.state is State.DRAINING
    core.spin()
    assert core.stub.state is State.READY
    core.feed(P.encode(P.FINALIZE, {}), P.encode(P.FINALIZE, {}))  # the repeat is ignored
    assert core.stub.state is State.UNLOADING
    core.spin(20)
    assert [f["type"] for f in core.sent()] == ["FINALIZE_DONE"]
    assert core.stub.state is State.DONE and core.stub.exit_code == 0


def test_the_moves_are_one_table() -> None:
    assert moved(State.STARTING, State.CONFIGURED, "AUTO_COMPLETE") is State.CONFIGURED
    assert moved(State.READY, State.DRAINING, "DRAIN") is State.DRAINING
    for current, to in [
        (State.READY, State.INITIALIZING),
        (State.CONFIGURED, State.CONFIGURED),
        (State.FINALIZING, State.READY),
        (State.DONE, State.READY),
    ]:
        with pytest.raises(C.ProtocolError, match=f"in state {current.name}"):
            moved(current, to, "x")


# ---------------------------------------------------------------- dispatch


def test_a_frame_type_the_backend_never_sends_is_a_protocol_error(
    core: Core, tmp_path: Path
) -> None:
    core.init(write_model(tmp_path, ECHO))
    core.feed(P.encode(P.INIT_DONE, {"json": {"ok": True}}))
    frames = core.sent()
    assert [f["type"] for f in frames] == ["ERROR"]
    assert f"frame type {P.INIT_DONE} is not sent to the stub" in frames[0]["body"]["message"]


def test_is_ready_is_answered_with_its_query_id(core: Core, tmp_path: Path) -> None:
    core.init(write_model(tmp_path, ECHO))
    core.feed(P.encode(P.IS_READY, {}, id=42))
    frames = core.sent()
    assert [(f["type"], f["id"]) for f in frames] == [("READY", 42)]
    assert frames[0]["body"]["ready"] == 1


# ---------------------------------------------------------------- the writer


def test_one_batch_alone_is_answered_in_its_own_frame(core: Core, tmp_path: Path) -> None:
    core.init(write_model(tmp_path, ECHO))
    core.feed(execute(1, 1.5, 2.0))
    frames = core.sent()
    assert [f["type"] for f in frames] == ["RESPONSES"]
    assert frames[0]["id"] == 1 and frames[0]["flags"] & P.FLAG_BATCH_DONE
    assert [e["outputs"][0]["data_hex"] for e in frames[0]["body"]["responses"]] == [
        struct.pack("<f", 3.0).hex(),
        struct.pack("<f", 4.0).hex(),
    ]


def test_quick_batches_read_together_are_answered_in_one_frame(
    core: Core, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every batch counts as quick, even if this busy machine preempts one.
    monkeypatch.setattr(engine, "_QUICK_NS", 10**12)
    core.init(write_model(tmp_path, ECHO))
    core.feed(execute(1, 1.0), execute(2, 2.0), execute(3, 3.0))
    frames = core.sent()
    assert [f["type"] for f in frames] == ["RESPONSES"]
    assert outputs(frames[0]) == {1: [2.0], 2: [4.0], 3: [6.0]}


WHERE = """
import threading
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        here = np.array([threading.get_ident()], np.uint64)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", here)]) for r in requests]
"""


def test_a_batch_read_by_another_thread_runs_on_the_loop_thread(core: Core, tmp_path: Path) -> None:
    """The deputy may read an EXECUTE just after the loop thread came back
    from model code (``away`` already cleared, the deputy's turn not yet
    over): the batch waits for the loop thread instead of running on the
    deputy, which would wait for its own lock there."""
    core.init(write_model(tmp_path, WHERE))
    assert not core.stub.turns.away
    reader = threading.Thread(target=core.feed, args=(execute(1, 1.0),))
    reader.start()
    reader.join()
    assert core.types() == []  # queued for the loop, not run on the reader
    core.spin()
    (frame,) = core.sent()
    (entry,) = frame["body"]["responses"]
    (ran_on,) = struct.unpack("<Q", bytes.fromhex(entry["outputs"][0]["data_hex"]))
    assert ran_on == threading.get_ident() != reader.ident


LARGE = """
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.ones(1 << 16, np.float32))])
                for r in requests]
"""


def test_a_new_arena_is_announced_before_the_frame_that_refers_to_it(
    core: Core, tmp_path: Path
) -> None:
    core.init(write_model(tmp_path, LARGE))
    core.feed(execute(1, 1.0))
    frames = core.sent()
    assert [f["type"] for f in frames] == ["ARENA", "RESPONSES"]
    arena = frames[0]
    assert len(arena["fds"]) == 1
    out = frames[1]["body"]["responses"][0]["outputs"][0]
    assert out["location"] == 1 and out["arena_id"] == arena["body"]["arena_id"]
    # The arena is announced once: the next large answer refers to it alone.
    release = {"allocations": [{"arena_id": out["arena_id"], "offset": out["offset"]}]}
    core.feed(P.encode(P.RELEASE, release), execute(2, 1.0))
    assert core.types() == ["RESPONSES"]


FORWARD = """
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    async def execute(self, requests):
        answers = []
        for r in requests:
            call = pb_utils.InferenceRequest(
                model_name="other", inputs=[r.inputs()[0]], requested_output_names=["OUT"])
            got = await call.async_exec()
            out = pb_utils.get_output_tensor_by_name(got, "OUT").as_numpy()
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out + 1)]))
        return answers
"""


def test_a_bls_call_goes_out_and_its_answer_comes_back_in(core: Core, tmp_path: Path) -> None:
    assert core.init(write_model(tmp_path, FORWARD))["execute"] == "async"
    core.feed(execute(1, 2.0))
    core.spin()
    frames = core.sent()
    assert [f["type"] for f in frames] == ["BLS_REQUEST"]
    call_id = frames[0]["id"]
    answer = {
        "response_flags": P.RESP_FINAL,
        "has_error": 0,
        "error_code": 0,
        "error_message": "",
        "parameters": "",
        "outputs": [fp32("OUT", [40.0])],
    }
    core.feed(P.encode(P.BLS_RESPONSE, answer, id=call_id))
    core.spin()
    frames = core.sent()
    assert [f["type"] for f in frames] == ["RESPONSES"]
    assert outputs(frames[0]) == {1: [41.0]}


EARLY_BLOCK = """
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        # Over 64 KiB: in a stub, the array lives in a new arena.
        TritonPythonModel.kept = pb_utils.Tensor.empty("OUT", [1 << 16], np.float32)
        return config
    def execute(self, requests):
        return [pb_utils.InferenceResponse([TritonPythonModel.kept]) for r in requests]
"""


def test_an_arena_made_in_auto_complete_is_announced_only_after_init(
    core: Core, tmp_path: Path
) -> None:
    """The backend takes no ARENA before INIT: the arena goes out with the
    first frame that refers to it."""
    model = write_model(tmp_path, EARLY_BLOCK)
    core.stub.start()
    assert core.types() == ["HELLO"]
    msg = {
        "model_name": "m",
        "config": '{"name": "m"}',
        "model_file": str(model / "model.py"),
        "model_dir": str(model),
        "settings": {},
    }
    core.feed(P.encode(P.AUTO_COMPLETE, {"json": msg}))
    core.spin()
    assert core.types() == ["AUTO_COMPLETE_DONE"]
    assert core.stub.state is State.CONFIGURED
    assert core.init(model, greeted=True)["ok"] is True
    assert [f["type"] for f in core.init_frames] == ["INIT_DONE"]
    core.feed(execute(1, 1.0))
    assert core.types() == ["ARENA", "RESPONSES"]
