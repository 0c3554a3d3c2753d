# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Types of the compiled module _engine.pyx (its C side: _engine.pxd)."""

import asyncio
from collections.abc import Callable
from typing import Any, NoReturn

from tritonpy.stub._batch import Batch, Outbox

_QUICK_NS: int
_now_ns: Callable[[], int]

class Engine:
    loop: asyncio.AbstractEventLoop
    out: Any
    own: Any
    turns: Any
    peer: Any
    metrics: Any
    names: Any
    life: Any
    model_name: str
    model: Any
    decoupled: bool
    hold_answers: bool
    batches: dict[int, Batch]
    outbox: Outbox
    batches_total: int
    execute_handler: Callable[[int, Any, Any], None]
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        out: Any,
        turns: Any,
        peer: Any,
        metrics: Any,
        names: Any,
        log: Any,
        life: Any,
        on_descriptor: Callable[[int, memoryview, list[int]], None],
        fatal: Callable[[str], None],
    ) -> None: ...
    def serve(self, model: Any, decoupled: bool, hold_answers: bool) -> None: ...
    def named(self, model_name: str) -> None: ...
    def on_frame(self, mv: memoryview, fds: list[int], more: bool) -> bool: ...
    def on_execute(self, fid: int, body: Any, buf: Any) -> None: ...
    def send(self, req: Any, response: Any, flags: int) -> None: ...
    def broke_rule(self, req: Any, message: str) -> NoReturn: ...
    def drained(self) -> None: ...
    def flush(self) -> None: ...
    def on_cancel(self, items: list[tuple[int, int]]) -> None: ...
    def on_send_error(self, batch_id: int, index: int, code: int, message: str) -> None: ...
    async def drain(self, grace: float) -> None: ...
