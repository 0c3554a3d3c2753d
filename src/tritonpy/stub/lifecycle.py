# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The life cycle of a stub: its states, the moves between them, and which
frames each state takes.

``Lifecycle.state`` is changed in one place, ``Lifecycle.move`` (on the
loop thread, which handles every frame that moves it), through ``moved``:
the allowed moves are all written in ``_MOVES``::

    STARTING --AUTO_COMPLETE--> CONFIGURED --INIT--> INITIALIZING
    STARTING --INIT--> INITIALIZING --ok--> READY   (--failed--> FAILED)
    READY --DRAIN--> DRAINING --work ended or cancelled--> READY
    READY, DRAINING (any state before them too) --FINALIZE--> UNLOADING
    UNLOADING --work drained, the model has finalize()--> FINALIZING
    UNLOADING, FINALIZING --FINALIZE_DONE sent--> DONE
    any state --EOF or a protocol error--> DONE

What each state does with each frame the backend sends is written in one
table, ``_TAKES``; dispatch reads it through ``Lifecycle.handlers``, the
current state's frame type -> handler map, swapped on every move (so the
hot path pays one dict lookup, as without states).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

from tritonpy.stub import _codec as C

# A frame's handler: (frame id, decoded body, the buffer the body is in).
Handler = Callable[[int, Any, Any], None]


class State(enum.IntEnum):
    STARTING = 0  # HELLO sent: AUTO_COMPLETE or INIT comes next
    CONFIGURED = 1  # auto_complete_config answered: the imported class waits for INIT
    INITIALIZING = 2  # INIT: importing the model, running initialize() (EXECUTE waits)
    READY = 3  # serving EXECUTE
    DRAINING = 4  # DRAIN: still serving; work in flight gets its grace, then ends
    UNLOADING = 5  # FINALIZE: no new EXECUTE; work in flight gets its grace, then ends
    FINALIZING = 6  # the model's finalize() runs: BLS is refused
    FAILED = 7  # INIT failed: the backend closes the socket next
    DONE = 8  # leaving: the loop stops


S = State
_MOVES: dict[State, frozenset[State]] = {
    S.STARTING: frozenset((S.CONFIGURED, S.INITIALIZING, S.UNLOADING, S.DONE)),
    S.CONFIGURED: frozenset((S.INITIALIZING, S.UNLOADING, S.DONE)),
    S.INITIALIZING: frozenset((S.READY, S.FAILED, S.DONE)),
    S.READY: frozenset((S.DRAINING, S.UNLOADING, S.DONE)),
    S.DRAINING: frozenset((S.READY, S.UNLOADING, S.DONE)),
    S.UNLOADING: frozenset((S.FINALIZING, S.DONE)),
    S.FINALIZING: frozenset((S.DONE,)),
    S.FAILED: frozenset((S.UNLOADING, S.DONE)),
    S.DONE: frozenset(),
}

# Frames of the backend that every state takes: answers to the stub's own
# calls, flow control, settings, readiness queries. (ARENA and BLS_ARENA
# carry a descriptor: Stub._on_descriptor_frame takes them.)
EVERY_STATE = (
    "ARENA BLS_ARENA BLS_RESPONSE MODEL_CONTROL_DONE METRIC_DONE RELEASE CANCEL "
    "SEND_ERROR LOG_LEVELS ERROR IS_READY"
)
# Frames model code may have the stub send in every state: the model
# loading API and custom metrics work in initialize() and finalize() too.
MODEL_SENDS_ALWAYS = "MODEL_CONTROL METRIC"

# What each state does with the other frames of the backend: it takes
# them (the handler runs) or ignores them (a repeat, or a DRAIN when there
# is nothing to drain); any other is a protocol error, "<FRAME> in state
# <STATE>": the stub sends ERROR and leaves. The last column: what else
# model code may send; BLS calls are refused in initialize() and
# finalize() (as on the official backend) with its message.
# fmt: off
_TAKES: dict[State, tuple[str, str, str]] = {
    # state         takes                           ignores           model code sends
    S.STARTING:     ("AUTO_COMPLETE INIT FINALIZE", "DRAIN",          ""),
    S.CONFIGURED:   ("INIT FINALIZE",               "DRAIN",          ""),
    # EXECUTE read in turn while initialize() runs waits for it (queued).
    S.INITIALIZING: ("EXECUTE",                     "DRAIN",          ""),
    S.READY:        ("EXECUTE DRAIN FINALIZE",      "",               "BLS_REQUEST"),
    S.DRAINING:     ("EXECUTE FINALIZE",            "DRAIN",          "BLS_REQUEST"),
    S.UNLOADING:    ("",                            "DRAIN FINALIZE", "BLS_REQUEST"),
    S.FINALIZING:   ("",                            "DRAIN FINALIZE", ""),
    S.FAILED:       ("FINALIZE",                    "DRAIN",          ""),
    S.DONE:         ("",                            "DRAIN FINALIZE", ""),
}
# fmt: on


def _types(names: str) -> frozenset[int]:
    return frozenset(getattr(C, name) for name in names.split())


# Frame type -> name, for every frame the table names.
_NAMED = EVERY_STATE.split() + [n for row in _TAKES.values() for col in row for n in col.split()]
_NAMES = {getattr(C, n): n for n in _NAMED}
TAKES = {s: _types(f"{EVERY_STATE} {row[0]}") for s, row in _TAKES.items()}
IGNORES = {s: _types(row[1]) for s, row in _TAKES.items()}
MODEL_SENDS = {s: _types(f"{MODEL_SENDS_ALWAYS} {row[2]}") for s, row in _TAKES.items()}


def moved(current: State, to: State, why: str) -> State:
    """``to``, if ``current`` allows moving there because of ``why`` (a
    frame's name, or an event); else a ProtocolError."""
    if to not in _MOVES[current]:
        raise C.ProtocolError(f"{why} in state {current.name}")
    return to


def _ignore(fid: int, body: Any, buf: Any) -> None:
    pass


def _refuse(name: str, state: State) -> Handler:
    def refused(fid: int, body: Any, buf: Any) -> None:
        raise C.ProtocolError(f"{name} in state {state.name}")

    return refused


class Lifecycle:
    """The stub's state, and the handlers of the frames it takes in it."""

    __slots__ = ("state", "handlers", "_by_state", "_handlers", "_wrap")

    def __init__(self) -> None:
        self.state = State.STARTING
        # Frame type -> what dispatch runs, in the current state.
        self.handlers: dict[int, Handler] = {}
        # Each state's map, made when the stub first enters the state: a
        # stub that serves visits four of the nine, and every map made
        # costs its start (a closure per frame type that route wraps).
        self._by_state: dict[State, dict[int, Handler]] = {}
        self._handlers: Mapping[int, Handler] = {}
        self._wrap: Callable[[int, Handler], Handler] | None = None

    def route(
        self,
        handlers: Mapping[int, Handler],
        wrap: Callable[[int, Handler], Handler] | None = None,
    ) -> None:
        """Each state's map from ``handlers`` (frame type -> handler, for
        every frame the backend sends but the two with a descriptor) and
        the table: the handler where the state takes the frame, a no-op
        where it ignores it, else one raising the ProtocolError.
        ``wrap(type, handler)``, if given, is what the map holds."""
        for ftype in handlers:
            if ftype not in _NAMES:
                raise ValueError(f"frame type {ftype} has a handler but no row in _TAKES")
        self._handlers, self._wrap = handlers, wrap
        self._by_state.clear()
        self.handlers = self._table(self.state)

    def _table(self, state: State) -> dict[int, Handler]:
        """``state``'s map (route's docstring), made on first use."""
        table = self._by_state.get(state)
        if table is not None:
            return table
        table = {}
        wrap = self._wrap
        for ftype, handler in self._handlers.items():
            if ftype in TAKES[state]:
                chosen = handler
            elif ftype in IGNORES[state]:
                chosen = _ignore
            else:
                chosen = _refuse(_NAMES[ftype], state)
            table[ftype] = wrap(ftype, chosen) if wrap is not None else chosen
        self._by_state[state] = table
        return table

    def move(self, to: State, why: str) -> None:
        """The one place the state changes: a ProtocolError if the current
        state does not allow ``to``."""
        self.state = moved(self.state, to, why)
        self.handlers = self._table(to)

    def model_may_send(self, ftype: int) -> bool:
        """Whether model code may have the stub send a frame of ``ftype``
        (BLS_REQUEST, MODEL_CONTROL, METRIC) now."""
        return ftype in MODEL_SENDS[self.state]
