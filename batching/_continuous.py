# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Continuous batching: one step function, every active stream in each step."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import heapq
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

D = TypeVar("D")
T = TypeVar("T")

# What a stream's queue holds after its last output.
_END = object()


class _Failure:
    """An error for a stream's queue, with its traceback as it was raised:
    every stream of the step re-raises the same exception object, and each
    raise would otherwise add its frames to the last one's."""

    __slots__ = ("error", "traceback")

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.traceback = error.__traceback__


class Sequence(Generic[D]):
    """One stream as the step function sees it.

    ``slot`` is a number below ``max_active`` that no other active stream
    holds: index a per-stream cache with it. ``steps`` counts the steps the
    stream has been in; 0 means this is its first, so its cache slot holds
    another stream's leftovers and must be filled afresh (prefill).
    ``data`` is what was passed to :meth:`ContinuousBatcher.generate`.
    Calling :meth:`finish` from the step function makes the output of this
    step the stream's last (an end-of-sequence token, say)."""

    __slots__ = (
        "data",
        "slot",
        "steps",
        "_limit",
        "_cost",
        "_cancelled",
        "_out",
        "_waiter",
        "_done",
    )

    def __init__(
        self, data: D, limit: int, cost: int, cancelled: Callable[[], bool] | None
    ) -> None:
        self.data = data
        self.slot = -1
        self.steps = 0
        self._limit = limit
        self._cost = cost
        self._cancelled = cancelled
        self._out: collections.deque[object] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False

    def finish(self) -> None:
        self._limit = self.steps + 1

    def _push(self, item: object) -> None:
        self._out.append(item)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)


class ContinuousBatcher(Generic[D, T]):
    """Runs ``step`` over the active streams, one output each per call, for
    as long as any stream is active.

    ``step(batch)`` takes the list of active :class:`Sequence` objects, in
    slot order, and returns one output per sequence, in that order. A plain function runs in a
    worker thread of the batcher's own, so the event loop keeps sending
    outputs and taking requests while it computes (PyTorch and NumPy release
    the GIL); an ``async def`` runs on the loop.

    ``max_active`` is the most streams in one step (the cache slots);
    ``cache_budget``, if given, the most ``cost`` summed over active
    streams (say, tokens of KV cache). Past either, new streams wait in
    arrival order; none is refused, and a stream costing more than the
    whole budget runs when it is the only one. ``on_step(active, outputs)``,
    if given, is called on the loop after each step and when the batcher
    falls idle: for metrics.
    """

    def __init__(
        self,
        step: Callable[[list[Sequence[D]]], list[T]]
        | Callable[[list[Sequence[D]]], Awaitable[list[T]]],
        *,
        max_active: int,
        cache_budget: int | None = None,
        on_step: Callable[[int, int], None] | None = None,
    ) -> None:
        if max_active < 1:
            raise ValueError(f"max_active must be at least 1, got {max_active}")
        if cache_budget is not None and cache_budget < 1:
            raise ValueError(f"cache_budget must be at least 1, got {cache_budget}")
        self._step = step
        self._async = inspect.iscoroutinefunction(step)
        self.max_active = max_active
        self.cache_budget = cache_budget
        self._on_step = on_step
        # A heap: the lowest free slot first, so active slots stay packed
        # at the start of a cache and a step can often read them as a range.
        self._free = list(range(max_active))
        self._active: dict[int, Sequence[D]] = {}  # slot -> sequence
        self._waiting: collections.deque[Sequence[D]] = collections.deque()
        self._used = 0
        self._steps = 0
        self._wake: asyncio.Future[None] | None = None
        self._runner: asyncio.Task[None] | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def active(self) -> int:
        """Streams holding a slot."""
        return len(self._active)

    @property
    def waiting(self) -> int:
        """Streams waiting for a slot or for budget."""
        return len(self._waiting)

    @property
    def steps(self) -> int:
        """Steps run so far."""
        return self._steps

    async def generate(
        self,
        data: D,
        *,
        steps: int,
        cost: int = 1,
        cancelled: Callable[[], bool] | None = None,
    ) -> AsyncIterator[T]:
        """The outputs of one stream: at most ``steps`` of them, one per
        step it takes part in. The stream leaves the batch, freeing its
        slot, when it has them all, when the step function calls
        :meth:`Sequence.finish`, when the iteration is cancelled or closed,
        or when ``cancelled()`` (polled before each step; pass
        ``request.is_cancelled``) turns true; then the iteration ends
        without error. An error raised by the step function is raised here,
        in every stream of that step."""
        if steps <= 0:
            return
        seq: Sequence[D] = Sequence(data, steps, cost, cancelled)
        self._waiting.append(seq)
        self._ensure_runner()
        self._poke()
        loop = asyncio.get_running_loop()
        try:
            while True:
                while not seq._out:
                    seq._waiter = loop.create_future()
                    await seq._waiter
                    seq._waiter = None
                item = seq._out.popleft()
                if item is _END:
                    return
                if type(item) is _Failure:
                    raise item.error.with_traceback(item.traceback)
                yield item  # type: ignore[misc]
        finally:
            self._leave(seq)

    def close(self) -> None:
        """Stops the runner; active and waiting streams end. For finalize,
        which may run on another thread than the loop (the official
        backend's does): the work is then handed to the loop."""
        loop = self._runner.get_loop() if self._runner is not None else None
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if loop is not None and loop is not current and loop.is_running():
            loop.call_soon_threadsafe(self._close)
        else:
            self._close()

    def _close(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            self._runner = None
        for seq in [*self._active.values(), *self._waiting]:
            self._leave(seq)
            seq._push(_END)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    # ------------------------------------------------------------------ inside

    def _ensure_runner(self) -> None:
        if self._runner is None or self._runner.done():
            self._runner = asyncio.get_running_loop().create_task(self._guarded())

    def _poke(self) -> None:
        w = self._wake
        if w is not None and not w.done():
            w.set_result(None)

    def _leave(self, seq: Sequence[D]) -> None:
        """Takes ``seq`` out at once: its slot and budget are free for the
        next step."""
        if seq._done:
            return
        seq._done = True
        if seq.slot >= 0:
            del self._active[seq.slot]
            heapq.heappush(self._free, seq.slot)
            self._used -= seq._cost
            self._poke()
        else:
            self._waiting.remove(seq)

    def _admit(self) -> None:
        budget = self.cache_budget
        while self._waiting and self._free:
            seq = self._waiting[0]
            if budget is not None and self._active and self._used + seq._cost > budget:
                break  # in order: a big stream is not overtaken for ever
            self._waiting.popleft()
            seq.slot = heapq.heappop(self._free)
            self._active[seq.slot] = seq
            self._used += seq._cost

    async def _guarded(self) -> None:
        try:
            await self._run()
        except BaseException as e:
            # The runner is gone (cancelled, or on_step raised): no stream
            # is left waiting for ever; the next generate() starts another.
            failure = e if isinstance(e, Exception) else RuntimeError("the batcher was stopped")
            for seq in [*self._active.values(), *self._waiting]:
                self._leave(seq)
                seq._push(_Failure(failure))
            if failure is not e:
                raise  # cancelled; an error went to the streams instead

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        reported = -1
        while True:
            self._admit()
            batch = []
            for _, seq in sorted(self._active.items()):
                if seq._cancelled is not None and seq._cancelled():
                    self._leave(seq)
                    seq._push(_END)
                else:
                    batch.append(seq)
            if not batch:
                if reported != 0 and self._on_step is not None:
                    self._on_step(0, 0)
                reported = 0
                if not self._waiting:
                    self._wake = loop.create_future()
                    await self._wake
                    self._wake = None
                continue
            try:
                outs = await self._call(loop, batch)
                if len(outs) != len(batch):
                    raise RuntimeError(
                        f"the step function returned {len(outs)} outputs for {len(batch)} sequences"
                    )
            except asyncio.CancelledError:
                raise
            except Exception as e:
                for seq in batch:
                    if not seq._done:
                        self._leave(seq)
                        seq._push(_Failure(e))
                continue
            self._steps += 1
            count = 0
            for seq, out in zip(batch, outs, strict=True):
                if seq._done:
                    continue  # left during the step: its output is dropped
                seq.steps += 1
                count += 1
                seq._push(out)
                if seq.steps >= seq._limit:
                    self._leave(seq)
                    seq._push(_END)
            if self._on_step is not None:
                self._on_step(len(self._active), count)
            reported = len(self._active)

    def _call(
        self, loop: asyncio.AbstractEventLoop, batch: list[Sequence[D]]
    ) -> Awaitable[list[T]]:
        if self._async:
            return self._step(batch)  # type: ignore[return-value]
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="tritonpy-batcher"
            )
        return loop.run_in_executor(self._executor, self._step, batch)  # type: ignore[arg-type]
