# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The life cycle of a stub: its states and the moves between them.

``Stub.state`` is changed in one place, ``Stub.move`` (on the loop thread,
which handles every frame that moves it), through ``moved``: the allowed
moves are all written in ``_MOVES``::

    STARTING --AUTO_COMPLETE--> CONFIGURED --INIT--> INITIALIZING
    STARTING --INIT--> INITIALIZING --ok--> READY   (--failed--> FAILED)
    READY --DRAIN--> DRAINING --work ended or cancelled--> READY
    READY, DRAINING (any state before them too) --FINALIZE--> UNLOADING
    UNLOADING --work drained, the model has finalize()--> FINALIZING
    UNLOADING, FINALIZING --FINALIZE_DONE sent--> DONE
    any state --EOF or a protocol error--> DONE
"""

from __future__ import annotations

import enum

from tritonpy.stub import _codec as C


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
# Where model code may make BLS calls: not in initialize() nor finalize(),
# as on the official backend.
BLS_ALLOWED = frozenset((S.READY, S.DRAINING, S.UNLOADING))
# Where a FINALIZE is a repeat, ignored.
UNLOADED = frozenset((S.UNLOADING, S.FINALIZING, S.DONE))


def moved(current: State, to: State, why: str) -> State:
    """``to``, if ``current`` allows moving there because of ``why`` (a
    frame's name, or an event); else a ProtocolError."""
    if to not in _MOVES[current]:
        raise C.ProtocolError(f"{why} in state {current.name}")
    return to
