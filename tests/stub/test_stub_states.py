# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Frames in states that do not take them, sent to a real stub process.

The life cycle's table (stub/lifecycle.py) says, per state, which frames
of the backend are taken, which are ignored (a repeat) and which are a
protocol error: the stub then sends ERROR, "protocol error: <FRAME> in
state <STATE>", and exits with 70. Each test brings a stub into one state
by the frames the backend sends, then drives the frames that state does
not take. A frame that is ignored is shown to be by the IS_READY query
behind it: answered, and nothing before the answer."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tritonpy.stub import _codec as C
from tritonpy.stub.lifecycle import IGNORES, MODEL_SENDS, TAKES, Lifecycle, State, moved

import protocol_ref as P
from host import StubHost, f32, write_model

ECHO = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([r.inputs()[0]]) for r in requests]
"""

# Its batches stay in flight until cancelled: DRAIN and FINALIZE find work
# to wait for (the grace is long), so DRAINING and UNLOADING last.
HOLD = """
import asyncio

class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.Event().wait()
"""

# finalize() logs, then waits on the loop for good: FINALIZING lasts.
SLOW_FINALIZE = """
import asyncio
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return []

    async def finalize(self):
        pb_utils.Logger.log_info("finalize() started")
        await asyncio.Event().wait()
"""

# Its import fails: INIT fails, the stub is FAILED.
FAILING_IMPORT = """
raise RuntimeError("no weights here")
"""

LONG_GRACE = {"finalize_grace_seconds": 600}


def execute(batch_id: int) -> bytes:
    return P.encode(P.EXECUTE, {"requests": [P.request("r", [f32("IN", [1.0])])]}, id=batch_id)


def init_frame(model_dir: Path) -> bytes:
    init = {
        "args": {"model_config": '{"name": "m"}', "model_name": "m"},
        "model_file": str(model_dir / "model.py"),
        "model_dir": str(model_dir),
        "settings": {},
    }
    return P.encode(P.INIT, {"json": init})


def auto_complete_frame(model_dir: Path) -> bytes:
    msg = {
        "model_name": "m",
        "config": '{"name": "m"}',
        "model_file": str(model_dir / "model.py"),
        "model_dir": str(model_dir),
    }
    return P.encode(P.AUTO_COMPLETE, {"json": msg})


def serves_on(host: StubHost, *frames: bytes, query: int = 77) -> None:
    """``frames`` are taken or ignored: the IS_READY behind them is the
    next frame answered, and the stub did not leave."""
    for frame in frames:
        host.send(frame)
    host.send(P.encode(P.IS_READY, {}, id=query))
    assert host.recv_type("READY")["id"] == query
    assert host.proc.poll() is None


def refused(host: StubHost, frame: bytes, why: str) -> None:
    """``frame`` is a protocol error: ERROR saying ``why``, and the stub leaves."""
    host.send(frame)
    error = host.recv_type("ERROR")
    assert error["body"]["message"] == f"protocol error: {why}"
    assert host.wait() == 70


def can_move(current: State, to: State) -> bool:
    try:
        moved(current, to, "test")
    except C.ProtocolError:
        return False
    return True


def greet(host: StubHost) -> None:
    assert host.recv_type("HELLO")["body"]["json"]["protocol"] == 1
    host.greeted = True


# ---------------------------------------------------------------- the table


def test_the_table_covers_every_frame_the_backend_sends_in_every_state() -> None:
    to_stub = {
        C.INIT,
        C.ARENA,
        C.EXECUTE,
        C.FINALIZE,
        C.ERROR,
        C.RELEASE,
        C.CANCEL,
        C.SEND_ERROR,
        C.IS_READY,
        C.DRAIN,
        C.BLS_RESPONSE,
        C.BLS_ARENA,
        C.MODEL_CONTROL_DONE,
        C.METRIC_DONE,
        C.AUTO_COMPLETE,
        C.LOG_LEVELS,
    }
    assert set(TAKES) == set(State)
    for state, taken in TAKES.items():
        assert taken <= to_stub, state
        # Answers to the stub's own calls and flow control: in any state.
        assert {C.BLS_RESPONSE, C.RELEASE, C.CANCEL, C.IS_READY, C.ARENA} <= taken, state


def test_a_frame_taken_makes_a_move_the_moves_allow() -> None:
    """The two tables agree: where a frame that moves the stub is taken,
    its move is allowed."""
    moves = {
        C.AUTO_COMPLETE: State.CONFIGURED,
        C.INIT: State.INITIALIZING,
        C.DRAIN: State.DRAINING,
        C.FINALIZE: State.UNLOADING,
    }
    for state, taken in TAKES.items():
        for ftype, to in moves.items():
            assert (ftype in taken) == can_move(state, to), (state, to)


def test_bls_is_for_execute_and_its_aftermath_only() -> None:
    """As on the official backend: not in initialize() nor finalize(); the
    model loading API and metrics in any state."""
    with_bls = {s for s, sends in MODEL_SENDS.items() if C.BLS_REQUEST in sends}
    assert with_bls == {State.READY, State.DRAINING, State.UNLOADING}
    assert all({C.MODEL_CONTROL, C.METRIC} <= sends for sends in MODEL_SENDS.values())


def test_a_state_map_is_made_on_first_entry_and_kept() -> None:
    """A stub pays only for the states it visits; each map follows the
    table (taken: the handler, wrapped; ignored: a no-op; else the
    ProtocolError)."""
    seen: list[tuple[int, int]] = []
    life = Lifecycle()
    life.route(
        {C.INIT: lambda f, b, buf: seen.append((C.INIT, f)), C.DRAIN: lambda f, b, buf: None},
        lambda ftype, h: lambda f, b, buf: h(f, b, buf),
    )
    assert set(life._by_state) == {State.STARTING}
    life.handlers[C.INIT](1, None, None)
    life.handlers[C.DRAIN](2, None, None)  # ignored in STARTING
    assert seen == [(C.INIT, 1)]
    life.move(State.INITIALIZING, "INIT")
    assert set(life._by_state) == {State.STARTING, State.INITIALIZING}
    assert C.INIT not in TAKES[State.INITIALIZING] | IGNORES[State.INITIALIZING]
    with pytest.raises(C.ProtocolError, match="INIT in state INITIALIZING"):
        life.handlers[C.INIT](3, None, None)
    first = life.handlers
    life.move(State.READY, "initialize() returned")
    life.move(State.DRAINING, "DRAIN")
    life.move(State.READY, "drained")
    assert life.handlers is life._by_state[State.READY]
    assert first is life._by_state[State.INITIALIZING]
    assert len(life._by_state) == 4


# ---------------------------------------------------------------- a real stub


def test_starting(host: StubHost) -> None:
    greet(host)
    serves_on(host, P.encode(P.DRAIN, {}))
    refused(host, execute(1), "EXECUTE in state STARTING")


def test_starting_takes_finalize(host: StubHost) -> None:
    """An instance unloaded before INIT: FINALIZE_DONE, and the stub leaves."""
    greet(host)
    host.send(P.encode(P.FINALIZE, {}))
    assert host.recv_type("FINALIZE_DONE")["body"]["json"] == {"ok": True}
    assert host.wait() == 0


def test_configured(host: StubHost, tmp_path: Path) -> None:
    model = write_model(tmp_path, ECHO)
    assert host.auto_complete(model, {"name": "m"})["ok"]
    serves_on(host, P.encode(P.DRAIN, {}))
    refused(host, auto_complete_frame(model), "AUTO_COMPLETE in state CONFIGURED")


def test_configured_refuses_execute(host: StubHost, tmp_path: Path) -> None:
    model = write_model(tmp_path, ECHO)
    assert host.auto_complete(model, {"name": "m"})["ok"]
    refused(host, execute(1), "EXECUTE in state CONFIGURED")


@pytest.mark.parametrize("frame", ["INIT", "AUTO_COMPLETE"])
def test_ready(host: StubHost, tmp_path: Path, frame: str) -> None:
    model = write_model(tmp_path, ECHO)
    assert host.handshake(model)["ok"]
    again = init_frame(model) if frame == "INIT" else auto_complete_frame(model)
    refused(host, again, f"{frame} in state READY")


def test_draining(host: StubHost, tmp_path: Path) -> None:
    assert host.load(tmp_path, HOLD, settings=LONG_GRACE)["ok"]
    host.send(execute(1))  # in flight for good: DRAINING lasts
    # A second DRAIN is ignored; EXECUTE is still taken.
    serves_on(host, P.encode(P.DRAIN, {}), P.encode(P.DRAIN, {}), execute(2))
    refused(host, init_frame(tmp_path / "m" / "1"), "INIT in state DRAINING")


def test_unloading(host: StubHost, tmp_path: Path) -> None:
    assert host.load(tmp_path, HOLD, settings=LONG_GRACE)["ok"]
    host.send(execute(1))  # in flight for good: UNLOADING lasts
    # FINALIZE again and DRAIN are ignored; no new EXECUTE.
    serves_on(host, P.encode(P.FINALIZE, {}), P.encode(P.FINALIZE, {}), P.encode(P.DRAIN, {}))
    refused(host, execute(2), "EXECUTE in state UNLOADING")


def test_finalizing(host: StubHost, tmp_path: Path) -> None:
    assert host.load(tmp_path, SLOW_FINALIZE)["ok"]
    host.send(P.encode(P.FINALIZE, {}))
    # finalize() has started once its log line is in (the queries that
    # bring it are answered in any state).
    deadline = time.monotonic() + 60
    query = 1
    while not any(log["message"] == "finalize() started" for log in host.logs):
        assert time.monotonic() < deadline, host.logs
        serves_on(host, query=query)
        query += 1
    serves_on(host, P.encode(P.FINALIZE, {}), P.encode(P.DRAIN, {}))
    refused(host, execute(1), "EXECUTE in state FINALIZING")


@pytest.mark.parametrize("frame", ["EXECUTE", "INIT"])
def test_failed(host: StubHost, tmp_path: Path, frame: str) -> None:
    model = write_model(tmp_path, FAILING_IMPORT)
    done = host.handshake(model)
    assert not done["ok"] and "no weights here" in done["error"]
    serves_on(host, P.encode(P.DRAIN, {}))
    refused(
        host, execute(1) if frame == "EXECUTE" else init_frame(model), f"{frame} in state FAILED"
    )


def test_failed_takes_finalize(host: StubHost, tmp_path: Path) -> None:
    model = write_model(tmp_path, FAILING_IMPORT)
    assert not host.handshake(model)["ok"]
    host.send(P.encode(P.FINALIZE, {}))
    assert host.recv_type("FINALIZE_DONE")["body"]["json"] == {"ok": True}
    assert host.wait() == 0
