# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Who drives the channel while model code holds the loop thread.

The stub's loop thread reads the socket and runs every frame's handler.
But the runtime also calls model code on that thread: a sync
``initialize``, ``execute``, ``finalize`` (a sync ``is_ready`` has a
thread of its own, stub/readiness.py), and model code may block it (a
blocking BLS call). While it is there the loop is *away*,
and the rules change:

- Whoever holds ``lock`` while the loop is away owns the channel: it may
  read and dispatch frames (``pump``) and run the jobs other threads
  posted. That is a BLS or metrics waiter reading for its own answer, the
  loop thread itself while it waits in a blocking BLS call, or the
  *deputy*: a thread that takes the channel over once the loop has been
  away for a whole tick (``TICK``), so cancellation flags, BLS and metric
  answers, logs and response-sender flushes still flow while a model
  sleeps in ``execute`` or waits in ``initialize`` for a thread of its own.
- Work another thread needs done on the channel (``run``/``soon``) is
  posted as a job while the loop is away and runs at the next turn, instead
  of waiting for the loop to come back (which could be never: an
  ``initialize`` waiting for a thread that creates a metric).
- ``leave()`` takes the lock before the loop reads again, so no frame is
  read by two threads, and runs what was posted meanwhile.

Entering costs the sync hot path four attribute operations, leaving three
checks (a lock round only when another thread had the channel meanwhile):
the deputy notices a long stay by itself (comparing ``epoch`` at its
ticks), and dozes after a second without any.
"""

from __future__ import annotations

import _thread
import asyncio
import collections
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tritonpy.stub._channel import Channel

# How long the loop must have been away before the deputy takes over, and
# how often it looks.
TICK = 0.02
# Ticks without any visit to model code after which the deputy dozes (it
# is roused by the next entry).
_IDLE_TICKS = 50


class Turns:
    __slots__ = (
        "loop",
        "channel",
        "loop_thread",
        "lock",
        "away",
        "epoch",
        "deputy_active",
        "dozing",
        "_rouse",
        "jobs",
        "flushers",
        "_wake_fd",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, channel: Channel) -> None:
        self.loop = loop
        self.channel = channel
        self.loop_thread = threading.get_ident()
        self.lock = threading.Lock()
        # Set by the loop thread around model code it calls (enter/leave).
        self.away = False
        self.epoch = 0  # visits to model code so far
        # The deputy is serving (it holds the lock, and polls the wake fd).
        self.deputy_active = False
        self.dozing = False
        self._rouse = threading.Event()
        self.jobs: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        # Flushes of queued outgoing work (responses, metrics, releases):
        # whoever has the channel runs them on every turn (start_deputy).
        self.flushers: tuple[Callable[[], Any], ...] = ()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    # ---------------------------------------------------------------- loop thread

    def enter(self) -> None:
        """The loop thread is about to run model code."""
        self.away = True
        self.epoch += 1
        if self.dozing:
            self.rouse()

    def execute(self, model: Any, requests: Any) -> Any:
        """``model.execute(requests)``, called by the loop thread between
        enter() and leave(): the lock round of leave() only when someone
        else had the channel or posted work meanwhile (a deputy about to
        serve holds the lock, and finds the loop back)."""
        self.enter()
        try:
            return model.execute(requests)
        finally:
            self.away = False
            if self.deputy_active or self.jobs or self.lock.locked():
                self.leave()

    @contextlib.contextmanager
    def model_code(self) -> Iterator[None]:
        """Around a call into model code on the loop thread (a no-op when
        the loop is already away)."""
        if self.away:
            yield
            return
        self.enter()
        try:
            yield
        finally:
            self.leave()

    def rouse(self) -> None:
        self.dozing = False
        self._rouse.set()

    def leave(self) -> None:
        """The loop thread is back: wait for whoever has the channel to end
        its turn, then run what was posted for the loop."""
        self.away = False
        if self.deputy_active:
            self.wake()
        with self.lock:
            if self.jobs:
                self._run_jobs()
        if self.jobs:  # posted while this thread held the lock
            self.loop.call_soon(self._run_jobs_locked)

    # ---------------------------------------------------------------- any thread

    def run(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` where the channel may be used: here on the loop
        thread when it is not away, else at the next turn (here and now if
        nobody has the channel)."""
        if threading.get_ident() == self.loop_thread:
            if not self.away:
                fn(*args)
                return
            # Model code on the loop thread (a BLS call from a sync
            # execute): at once, if nobody else has the channel.
            if not self.deputy_active and self.lock.acquire(False):
                try:
                    if self.jobs:
                        self._run_jobs()
                    fn(*args)
                finally:
                    self.lock.release()
                return
        elif not self.away:
            self.loop.call_soon_threadsafe(fn, *args)
            return
        self._post(fn, args)

    def soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Like ``run``, but on the loop thread deferred to the end of the
        loop iteration (flushes, so that what one iteration queued leaves
        together). While the loop is away, the deputy's flushers pick the
        work up."""
        if threading.get_ident() == self.loop_thread:
            self.loop.call_soon(fn, *args)
            if self.away and self.deputy_active:
                self.wake()
            return
        if not self.away:
            try:
                self.loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # loop closed: the process is leaving
                pass
            return
        self._post(fn, args)

    def _post(self, fn: Callable[..., Any], args: tuple) -> None:
        self.jobs.append((fn, args))
        if not self.deputy_active and self.lock.acquire(False):
            try:
                if self.away or threading.get_ident() == self.loop_thread:
                    self._run_jobs()
                else:  # the loop came back meanwhile: the jobs are its
                    self.loop.call_soon_threadsafe(self._run_jobs_locked)
            finally:
                self.lock.release()
            return
        # Whoever has the channel polls the wake fd and runs the jobs at
        # the end of its turn (leave() too, and what it misses it hands to
        # the loop).
        self.wake()

    def _run_jobs_locked(self) -> None:
        with self.lock:
            self._run_jobs()

    def _run_jobs(self) -> None:
        """With ``lock`` held."""
        jobs = self.jobs
        while jobs:
            fn, args = jobs.popleft()
            fn(*args)

    def wake(self) -> None:
        try:
            os.eventfd_write(self._wake_fd, 1)
        except OSError:  # the counter is saturated: a wake is pending anyway
            pass

    # ---------------------------------------------------------------- reading in turn

    def hold(self) -> bool:
        """On the loop thread while it is away in model code (a blocking
        BLS call from a sync execute): take the channel, unless another
        thread has it, and run what was posted. True with ``lock`` held:
        the caller ``turn``s as long as it needs, then releases ``lock``."""
        if (
            not self.away
            or self.deputy_active
            or threading.get_ident() != self.loop_thread
            or not self.lock.acquire(False)
        ):
            return False
        try:
            if self.jobs:
                self._run_jobs()
        except BaseException:
            self.lock.release()
            raise
        return True

    def pump(self, timeout: float) -> bool:
        """Take the channel for one poll of up to ``timeout`` seconds:
        write what is queued, read and dispatch what arrives, run posted
        jobs. False (at once) if someone else has it or it is the loop's."""
        if not self.lock.acquire(False):
            return False
        try:
            if not self.away and threading.get_ident() != self.loop_thread:
                return False
            self.turn(timeout)
            return True
        finally:
            self.lock.release()

    def turn(self, timeout: float, spin_ns: int = 0) -> bool:
        """With ``lock`` held: one poll of the channel and the wake fd, its
        first ``spin_ns`` nanoseconds without sleeping (Channel.turn: True
        when something came then)."""
        if self.jobs:
            self._run_jobs()
        for flush in self.flushers:
            flush()
        caught = self.channel.turn(self._wake_fd, timeout, spin_ns)
        if self.jobs:
            self._run_jobs()
        return caught

    # ---------------------------------------------------------------- the deputy

    def start_deputy(self, flushers: list[Callable[[], Any]]) -> None:
        """Start the deputy; ``flushers`` send what is queued to go out, on
        every turn of whoever has the channel."""
        self.flushers = tuple(flushers)
        # Not threading.Thread.start(), which waits until the new thread
        # has run: on a busy machine a scheduler slice (1.7 ms median on
        # the shared 2-core box, against 0.1 ms) before the stub reads its
        # first frame. Nothing needs the deputy sooner than a tick. (Nor a
        # threading.Thread of its own, which it would build while the loop
        # thread handles that frame: threading.enumerate() leaves it out.)
        _thread.start_new_thread(self._watch, ())

    def _watch(self) -> None:
        seen = self.epoch
        idle = 0
        while not self.channel.closed:
            if self._rouse.wait(TICK):
                self._rouse.clear()
            epoch = self.epoch
            if epoch != seen:
                seen, idle = epoch, 0
                continue
            if self.away:
                self._serve(epoch)
                continue
            idle += 1
            if idle >= _IDLE_TICKS:
                # Doze until the next visit to model code. Checked again
                # after the flag is up: an entry that missed it moved epoch.
                self.dozing = True
                if self.epoch != seen:
                    self.dozing = False
                    continue
                self._rouse.wait()
                self._rouse.clear()
                idle = 0

    def _serve(self, epoch: int) -> None:
        """The loop has been away for a tick in the same visit: drive the
        channel until it is back."""
        with self.lock:
            self.deputy_active = True
            try:
                while self.away and self.epoch == epoch and not self.channel.closed:
                    self.turn(TICK)
            except Exception as e:  # noqa: BLE001 - a handler's failure must not end the deputy
                self._report(e)
            finally:
                self.deputy_active = False

    def _report(self, e: BaseException) -> None:
        self.loop.call_soon_threadsafe(
            self.loop.call_exception_handler,
            {"message": "tritonpy: reading the channel in turn failed", "exception": e},
        )
