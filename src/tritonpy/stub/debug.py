# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Resource counters of the stub, on when TRITONPY_DEBUG is set (to
anything but 0) in the server's environment.

Nothing is counted on the hot path: the counters are read from the
engine's own tables on a 100 ms timer. Whenever the stub is idle (no
request in flight) and the counters differ from the last idle line, one
line goes to Triton's log::

    tritonpy-debug stub <instance> idle: batches_total=12 batches=0 requests=0 ...

After any load, the last such line of an instance must show zeros: the
tests assert it (tests/integration/test_debug_counters.py).
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonpy.stub._engine import Engine
    from tritonpy.stub.arena import OwnArenas
    from tritonpy.stub.bls import BlsClient
    from tritonpy.stub.names import ModelNames
    from tritonpy.stub.pylogging import TritonLog

PERIOD = 0.1
LOG_INFO = 0


def enabled() -> bool:
    return os.environ.get("TRITONPY_DEBUG", "") not in ("", "0")


def counters(
    engine: Engine, bls: BlsClient, own: OwnArenas, batches_total: int = 0
) -> dict[str, int]:
    batches = list(engine.batches.values())
    return {
        # Batches received so far: tells a line written after some load
        # from one written before it.
        "batches_total": batches_total,
        "batches": len(batches),
        "requests": sum(len(b.requests) for b in batches),
        # Senders of requests not yet complete (no final flag yet).
        "senders": sum(b.open for b in batches),
        "tasks": sum(1 for b in batches if b.task is not None and not b.task.done()),
        "pending_responses": len(engine.outbox),
        # BLS calls whose futures or iterators are still waiting.
        "bls_calls": bls.in_flight(),
        "arena_bytes": own.live_bytes,
        "arena_allocations": own.live_count,
        # Output and BLS input bytes copied into the arenas so far.
        "bytes_copied": own.bytes_copied,
    }


class IdleReporter:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        engine: Engine,
        bls: BlsClient,
        own: OwnArenas,
        log: TritonLog,
        names: ModelNames,
    ) -> None:
        self._loop = loop
        self._engine = engine
        self._bls = bls
        self._own = own
        self._log = log
        self._names = names
        self._last = ""

    def start(self) -> None:
        self._loop.call_later(PERIOD, self._tick)

    def _tick(self) -> None:
        try:
            now = counters(self._engine, self._bls, self._own, self._engine.batches_total)
            if now["requests"] == 0:
                # key=value pairs: Triton's log escapes quotes, so no JSON.
                line = " ".join(f"{k}={v}" for k, v in now.items())
                if line != self._last:
                    self._last = line
                    self._log.log(
                        LOG_INFO, f"tritonpy-debug stub {self._names.instance} idle: {line}"
                    )
        finally:
            self._loop.call_later(PERIOD, self._tick)
