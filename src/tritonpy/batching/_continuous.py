# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Continuous batching: one step function, every active stream in each step."""

from __future__ import annotations

import asyncio
import atexit
import collections
import heapq
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

D = TypeVar("D")
T = TypeVar("T")

# What a stream's queue holds after its last output.
_END = object()

# Stepping threads, stopped and joined when the interpreter exits: none may
# still be inside the step function (native code), or even dropping its
# last tensors, while Python finalizes, which aborts the process.
_steppers: set[_Stepper] = set()
_steppers_lock = threading.Lock()


@atexit.register
def _stop_steppers() -> None:
    with _steppers_lock:
        steppers = list(_steppers)
    for stepper in steppers:
        with stepper.owner._lock:
            stepper.stop()
        stepper.join()


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
    slot order, and returns one output per sequence, in that order. A plain
    function runs in a thread of the batcher's own, step after step: the
    next step starts as soon as one returns, while the event loop hands that
    step's outputs to the streams, sends them and takes requests (PyTorch and
    NumPy release the GIL). The thread runs at most one step ahead of the
    loop. An ``async def`` runs on the loop.

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
        # Who holds a slot and who waits: changed by the loop (streams
        # joining and leaving) and by the stepping thread (streams ending),
        # always under this lock; ``_wakeup`` tells the thread of a change.
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        # A heap: the lowest free slot first, so active slots stay packed
        # at the start of a cache and a step can often read them as a range.
        self._free = list(range(max_active))
        self._active: dict[int, Sequence[D]] = {}  # slot -> sequence
        self._waiting: collections.deque[Sequence[D]] = collections.deque()
        # plain step: streams that came during this turn of the loop; they
        # join the waiting ones together at its end, so that streams that
        # arrive at once start in the same step, as with an async step.
        self._arriving: list[Sequence[D]] = []
        self._used = 0
        self._steps = 0
        # async step: the runner task and its wake-up future.
        self._wake: asyncio.Future[None] | None = None
        self._runner: asyncio.Task[None] | None = None
        # plain step: the stepping thread, and one step call at a time even
        # while a stopped thread finishes its last one.
        self._stepper: _Stepper[D, T] | None = None
        self._calling = threading.Lock()

    @property
    def active(self) -> int:
        """Streams holding a slot."""
        return len(self._active)

    @property
    def waiting(self) -> int:
        """Streams waiting for a slot or for budget."""
        return len(self._waiting) + len(self._arriving)

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
        loop = asyncio.get_running_loop()
        if self._async:
            self._waiting.append(seq)
            self._ensure_runner()
            self._poke()
        else:
            with self._lock:
                if not self._arriving:
                    loop.call_soon(self._arrived)
                self._arriving.append(seq)
                self._ensure_stepper(loop)
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
        """Stops stepping; active and waiting streams end. For finalize,
        which may run on another thread than the loop (the official
        backend's does): the streams are then told on the loop."""
        loop = self._loop()
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if loop is not None and loop is not current and loop.is_running():
            try:
                loop.call_soon_threadsafe(self._close)
                return
            except RuntimeError:  # closed meanwhile
                pass
        self._close()

    # ------------------------------------------------------------------ inside

    def _loop(self) -> asyncio.AbstractEventLoop | None:
        if self._runner is not None:
            return self._runner.get_loop()
        stepper = self._stepper
        return stepper.loop if stepper is not None else None

    def _close(self) -> None:
        self._end_all(None)

    def _end_all(self, failure: BaseException | None) -> None:
        """On the loop: every stream ends (with ``failure``, if given), and
        the runner or stepping thread stops; the next generate() starts
        another."""
        if self._runner is not None:
            self._runner.cancel()
            self._runner = None
        with self._lock:
            if self._stepper is not None:
                self._stepper.stop()
                self._stepper = None
            gone = [*self._active.values(), *self._waiting, *self._arriving]
            for seq in gone:
                self._leave_locked(seq)
        for seq in gone:
            seq._push(_END if failure is None else _Failure(failure))

    def _ensure_runner(self) -> None:
        if self._runner is None or self._runner.done():
            self._runner = asyncio.get_running_loop().create_task(self._guarded())

    def _ensure_stepper(self, loop: asyncio.AbstractEventLoop) -> None:
        """With ``_lock`` held."""
        if self._stepper is None:
            self._stepper = _Stepper(self, loop)

    def _poke(self) -> None:
        w = self._wake
        if w is not None and not w.done():
            w.set_result(None)

    def _leave(self, seq: Sequence[D]) -> None:
        """Takes ``seq`` out at once: its slot and budget are free for the
        next step."""
        if seq._done:
            return
        with self._lock:
            self._leave_locked(seq)
            self._wakeup.notify()
        if self._async:
            self._poke()

    def _leave_locked(self, seq: Sequence[D]) -> None:
        if seq._done:
            return
        seq._done = True
        if seq.slot >= 0:
            del self._active[seq.slot]
            heapq.heappush(self._free, seq.slot)
            self._used -= seq._cost
        elif seq in self._arriving:
            self._arriving.remove(seq)
        else:
            self._waiting.remove(seq)

    def _arrived(self) -> None:
        """At the end of a loop turn: the streams that came during it
        wait for the next step, together."""
        with self._lock:
            self._waiting.extend(self._arriving)
            self._arriving.clear()
            self._wakeup.notify()

    def _admit_locked(self) -> None:
        budget = self.cache_budget
        while self._waiting and self._free:
            seq = self._waiting[0]
            if budget is not None and self._active and self._used + seq._cost > budget:
                break  # in order: a big stream is not overtaken for ever
            self._waiting.popleft()
            seq.slot = heapq.heappop(self._free)
            self._active[seq.slot] = seq
            self._used += seq._cost

    def _next_batch(self, poll: bool = True) -> tuple[list[Sequence[D]], list[Sequence[D]]]:
        """Admits waiting streams and, if ``poll``, polls ``cancelled``: the
        next step's batch, and the streams that left because they were
        cancelled."""
        with self._lock:
            self._admit_locked()
            candidates = [seq for _, seq in sorted(self._active.items())]
        if not poll:
            return candidates, []
        batch, gone = [], []
        for seq in candidates:
            if seq._cancelled is not None and seq._cancelled():
                gone.append(seq)
            else:
                batch.append(seq)
        if gone:
            with self._lock:
                for seq in gone:
                    self._leave_locked(seq)
        return batch, gone

    def _settle(
        self, batch: list[Sequence[D]], outs: list[T] | None, error: Exception | None
    ) -> tuple[list[tuple[Sequence[D], object, bool]], int]:
        """After a step: what each stream of ``batch`` still in it gets (its
        output, and whether that was its last), and how many outputs."""
        if error is None and outs is not None and len(outs) != len(batch):
            error = RuntimeError(
                f"the step function returned {len(outs)} outputs for {len(batch)} sequences"
            )
        given: list[tuple[Sequence[D], object, bool]] = []
        with self._lock:
            if error is not None:
                failure = _Failure(error)
                for seq in batch:
                    if not seq._done:
                        self._leave_locked(seq)
                        given.append((seq, failure, True))
                return given, 0
            assert outs is not None
            self._steps += 1
            for seq, out in zip(batch, outs, strict=True):
                if seq._done:
                    continue  # left during the step: its output is dropped
                seq.steps += 1
                last = seq.steps >= seq._limit
                if last:
                    self._leave_locked(seq)
                given.append((seq, out, last))
        return given, len(given)

    def _hand_out(self, given: list[tuple[Sequence[D], object, bool]]) -> None:
        """On the loop: each stream gets its output (and its end)."""
        for seq, out, last in given:
            seq._push(out)
            if last and type(out) is not _Failure:
                seq._push(_END)

    # ------------------------------------------------------------ async step

    async def _guarded(self) -> None:
        try:
            await self._run()
        except BaseException as e:
            # The runner is gone (cancelled, or on_step raised): no stream
            # is left waiting for ever; the next generate() starts another.
            failure = e if isinstance(e, Exception) else RuntimeError("the batcher was stopped")
            self._runner = None
            self._end_all(failure)
            if failure is not e:
                raise  # cancelled; an error went to the streams instead

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        reported = -1
        while True:
            batch, gone = self._next_batch()
            for seq in gone:
                seq._push(_END)
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
                outs, error = await self._step(batch), None  # type: ignore[misc]
            except asyncio.CancelledError:
                raise
            except Exception as e:
                outs, error = None, e
            given, count = self._settle(batch, outs, error)
            self._hand_out(given)
            if error is None and self._on_step is not None:
                self._on_step(len(self._active), count)
            reported = len(self._active)


class _Stepper(Generic[D, T]):
    """The thread that runs a plain step function, step after step.

    After a step it hands the outputs to the loop and starts the next step
    at once; it waits for the loop only before handing out the step after
    that, so the loop is never more than one step behind and ``cancelled``
    is polled after the streams have seen all but the last step's outputs
    (as when the loop runs the steps). ``stop()`` (with the batcher's lock)
    makes it end after its current step, dropping what that step made."""

    def __init__(self, owner: ContinuousBatcher[D, T], loop: asyncio.AbstractEventLoop) -> None:
        self.owner = owner
        self.loop = loop
        self.stopped = False
        self._handed = threading.Semaphore(1)  # taken per hand-out, given back on the loop
        self._thread = threading.Thread(target=self._main, name="tritonpy-batcher", daemon=True)
        with _steppers_lock:
            for ended in [s for s in _steppers if not s._thread.is_alive()]:
                _steppers.discard(ended)
            _steppers.add(self)
        self._thread.start()

    def stop(self) -> None:
        """With the batcher's lock held."""
        self.stopped = True
        self.owner._wakeup.notify_all()
        self._handed.release()

    def join(self) -> None:
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _main(self) -> None:
        owner = self.owner
        reported = -1
        # The ends of streams cancelled before a step go out with its outputs.
        ended: list[tuple[Sequence[D], object, bool]] = []
        while not self.stopped:
            batch, gone = owner._next_batch(poll=False)  # the loop polls (_handed_out)
            ended.extend((seq, _END, False) for seq in gone)
            if not batch:
                if ended or reported != 0:
                    if not self._post(ended, 0 if reported != 0 else -1, 0):
                        return
                    ended = []
                reported = 0
                with owner._lock:
                    while not self.stopped and not owner._waiting and not owner._active:
                        owner._wakeup.wait()
                continue
            with owner._calling:
                if self.stopped:
                    return
                try:
                    outs, error = owner._step(batch), None
                except Exception as e:
                    outs, error = None, e
            given, count = owner._settle(batch, outs, error)  # type: ignore[arg-type]
            reported = len(owner._active)
            if not self._post(ended + given, reported if error is None else -1, count):
                return
            ended = []

    def _post(self, given: list[tuple[Sequence[D], object, bool]], active: int, count: int) -> bool:
        """Hands ``given`` to the loop (and ``on_step(active, count)`` unless
        ``active`` is -1) once it has dealt with the last hand-out; False
        when the thread should end."""
        self._handed.acquire()
        if self.stopped:
            return False
        try:
            self.loop.call_soon_threadsafe(self._deliver, given, active, count)
        except RuntimeError:  # the loop is closed: nobody is left to serve
            self.stopped = True
            return False
        return True

    def _deliver(
        self, given: list[tuple[Sequence[D], object, bool]], active: int, count: int
    ) -> None:
        owner = self.owner
        try:
            owner._hand_out(given)
            if active >= 0 and owner._on_step is not None:
                owner._on_step(active, count)
        except Exception as e:
            # on_step raised: no stream is left waiting for ever; the next
            # generate() starts another thread.
            if owner._stepper is self:
                owner._end_all(e)
            return
        # The streams woken above run their turn before this.
        self.loop.call_soon(self._handed_out)

    def _handed_out(self) -> None:
        """On the loop, once the streams have seen a hand-out: polls
        ``cancelled`` (here, not in the thread: on the official backend
        ``request.is_cancelled`` is a round trip to the server, which
        must not hold up the steps) and lets the thread hand out again.
        A cancelled stream leaves at once; what the running step makes
        for it is dropped."""
        owner = self.owner
        with owner._lock:
            active = list(owner._active.values())
        try:
            for seq in active:
                if seq._cancelled is not None and not seq._done and seq._cancelled():
                    owner._leave(seq)
                    seq._push(_END)
        finally:
            self._handed.release()
