# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The model's ``is_ready()``, asked by IS_READY frames (docs/engine.md,
*Readiness*).

- A sync ``is_ready`` runs on a thread of its own, never on the loop
  thread: a sync ``execute`` may hold that thread for longer than the
  backend's ``ready-timeout-seconds``, and the official stub, too, calls
  ``is_ready`` beside a running ``execute``. The IS_READY frame is taken by
  whoever reads the channel (the deputy while the loop is away).
- An ``async def is_ready`` runs as a task on the loop.
- One call at a time: queries that arrive while a call runs wait for it
  and get its answer, as on the official backend.
- The answer must be a bool; anything else is "not ready" with the
  official backend's message.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tritonpy.stub.names import ModelNames
    from tritonpy.stub.outbound import Outbound
    from tritonpy.stub.turns import Turns

__all__ = ["Readiness"]

# The official stub's text for an answer that is not a bool.
NOT_A_BOOL = "is_ready() must return a boolean value"


class Readiness:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, turns: Turns, out: Outbound, names: ModelNames
    ) -> None:
        self.loop = loop
        self.turns = turns
        self.out = out
        self.names = names
        # The model instance (set by the runtime from INIT on): whose
        # is_ready() is asked.
        self.model: Any = None
        self._lock = threading.Lock()
        self._waiting: list[int] = []  # query ids the running call answers

    def on_query(self, query: int, body: Any, buf: Any) -> None:
        """An IS_READY frame (any thread that reads the channel)."""
        check = getattr(self.model, "is_ready", None)
        if check is None:
            self._answer([query], True, "")
            return
        with self._lock:
            self._waiting.append(query)
            if len(self._waiting) > 1:
                return  # a call is running: its answer is this query's too
        if inspect.iscoroutinefunction(check):
            self.loop.call_soon_threadsafe(self._start_task, check)
        else:
            threading.Thread(
                target=self._call, args=(check,), name="tritonpy-is-ready", daemon=True
            ).start()

    def _call(self, check: Any) -> None:
        """The readiness thread: a sync is_ready()."""
        try:
            result = check()
        except Exception as e:  # noqa: BLE001 - the model's failure is its answer
            self._finish(False, _raised(e))
            return
        if inspect.isawaitable(result):
            self.loop.call_soon_threadsafe(self._start_task, lambda: result)
            return
        self._finish(*self._judge(result))

    def _start_task(self, make: Any) -> None:
        """The loop: await what ``make()`` returns."""
        try:
            awaitable = make()
        except Exception as e:  # noqa: BLE001
            self._finish(False, _raised(e))
            return
        task = self.loop.create_task(_await(awaitable))
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        if task.cancelled():
            self._finish(False, "is_ready() was cancelled")
        elif (e := task.exception()) is not None:
            self._finish(False, _raised(e))
        else:
            self._finish(*self._judge(task.result()))

    def _judge(self, result: Any) -> tuple[bool, str]:
        if result is True:
            return True, ""
        if result is False:
            return False, f"model '{self.names.model}': is_ready() returned False"
        return False, (
            f"{NOT_A_BOOL} (tritonpy: model '{self.names.model}' returned {type(result).__name__})"
        )

    def _finish(self, ready: bool, message: str) -> None:
        """Any thread: answer every query the call was asked for."""
        with self._lock:
            queries, self._waiting = self._waiting, []
        self.turns.run(self._answer, queries, ready, message)

    def _answer(self, queries: list[int], ready: bool, message: str) -> None:
        """Where the channel may be used."""
        out = self.out
        for query in queries:
            out.ready(query, ready, message)


def _raised(e: BaseException) -> str:
    return f"is_ready() raised {type(e).__name__}: {e}"


async def _await(aw: Any) -> Any:
    return await aw
