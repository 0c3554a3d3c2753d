# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Execute batches, response senders and cancellation, on the stub's loop.

Every batch is a ``Batch``. A sync ``execute`` runs inline, one batch at a
time (the backend sends the next one when this one is over); an
``async def execute`` runs as a task, so many batches are in flight at once.
What each request costs (building the requests of a batch, checking and
encoding its answers) is compiled, in _batch.pyx; this module decides
when it runs.

Responses wait in the outbox and leave as few RESPONSES frames as fit:
- default mode, returned from ``execute``: the batch's entries, the last one
  ending the batch (BATCH_END). A sync batch's go when the channel has
  handed over every message of the read that brought it (``drained``), so
  a burst of quick batches read together is answered in one frame (not
  with an execute timeout, nor while batches take 1 ms or more; the
  last batch of a read, with nothing waiting, writes its frame at once,
  ended by BATCH_DONE); an async batch's at the end of the loop iteration
  its task ended in;
- sent through a response sender (either mode, during ``execute`` or after
  it returned): encoded at once, flushed once per loop iteration, from
  whichever thread sent.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import traceback
import types
from typing import TYPE_CHECKING, Any, NoReturn

from tritonpy.pb_utils import _seam
from tritonpy.pb_utils._seam import execute_failed, pb_utils
from tritonpy.stub import _batch
from tritonpy.stub import _codec as C
from tritonpy.stub._batch import Batch

if TYPE_CHECKING:
    from tritonpy.stub._channel import Channel
    from tritonpy.stub.arena import PeerArenas
    from tritonpy.stub.metrics import MetricClient
    from tritonpy.stub.names import ModelNames
    from tritonpy.stub.outbound import Outbound
    from tritonpy.stub.pylogging import TritonLog
    from tritonpy.stub.turns import Turns

_Response = pb_utils.InferenceResponse
_MakeBatch = _batch.make_batch
_Answer = _batch.answer
_CheckResult = _batch.check_result
_Entry = _batch.entry
_WriteEntries = _batch.write_entries
_CANCELLED = pb_utils.TritonError.CANCELLED
_Coroutine = types.CoroutineType
_UNAVAILABLE = pb_utils.TritonError.UNAVAILABLE
_INVALID_ARG = pb_utils.TritonError.INVALID_ARG
_execute_failed_text = execute_failed
_now_ns = time.monotonic_ns
# A sync batch's answers wait for the batches read with it only when it
# took less than this and so did the model's batches lately (an average
# weighing the newest 1/8): a model whose batches are quick loses nothing
# by it, one with slow batches would make answers already made wait for
# them. An average, not the last slow batch: on a busy machine a quick
# batch preempted for a time slice takes milliseconds now and then.
_QUICK_NS = 1_000_000


class Engine:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        out: Outbound,
        turns: Turns,
        channel: Channel,
        peer: PeerArenas,
        metrics: MetricClient,
        names: ModelNames,
        log: TritonLog,
    ) -> None:
        self.loop = loop
        self.channel = channel  # read coalescing: more, drained_wanted
        self.out = out
        self.turns = turns
        self.own = out.own
        self.peer = peer  # the backend's arenas: where inputs may be
        self.metrics = metrics  # its queued deletions go before responses
        self.names = names
        self._log = log.log
        # The model's name, read per request: the runtime keeps it equal to
        # names.model.
        self.model_name = names.model
        self.model: Any = None
        self.decoupled = False
        self.batches: dict[int, Batch] = {}
        self._lock = threading.Lock()
        self.outbox = _batch.Outbox(self._lock)  # entries for the next flush
        self._loop_thread = threading.get_ident()
        self.hold_answers = False  # set at INIT: no execute timeout
        self._started_ns = 0  # when the last execute() started
        self._typical_ns = 0  # average time of the sync batches read with others

    # ---------------------------------------------------------------- execute

    def on_execute(self, batch_id: int, wire: list[C.WireRequest], buf: Any) -> None:
        batch = _MakeBatch(batch_id, self, wire, buf, self.peer, self.model_name)
        if batch_id in self.batches:
            raise C.ProtocolError(f"batch id {batch_id} is already in flight")
        self.batches[batch_id] = batch
        if batch.rejected is not None and not self._reject(batch):
            return
        requests = batch.given
        self._started_ns = _now_ns()
        try:
            # The loop is back before the answers go, so that what model
            # code posted goes first.
            result = self.turns.execute(self.model, requests)
        except BaseException as e:  # noqa: BLE001 - any error of the model goes to its requests
            self._execute_failed(batch, e)
            return
        if type(result) is not list and inspect.isawaitable(result):
            # A coroutine (the usual ``async def execute``) becomes the task
            # itself; other awaitables get a wrapper coroutine.
            coro = result if type(result) is _Coroutine else _await(result)
            batch.task = self.loop.create_task(coro)
            batch.task.add_done_callback(lambda t: self._task_done(batch, t))
            return
        batch.returned = True
        if self.decoupled:
            self._decoupled_returned(batch, result)
        else:
            self._default_returned(batch, result)

    def _reject(self, batch: Batch) -> bool:
        """The requests of ``batch`` whose inputs the stub cannot take fail
        alone, with INVALID_ARG; execute() gets the others. False when none
        is left (the batch is over)."""
        for req, why in batch.rejected or ():
            if self._close(req):
                self._queue(
                    req, _Response(error=pb_utils.TritonError(why, _INVALID_ARG)), C.RESP_FINAL
                )
        batch.given = [r for r in batch.requests if not _seam.is_closed(r)]
        self.flush()
        if batch.given:
            return True
        batch.returned = True
        self.out.execute_done(batch.id, True)
        self._forget(batch)
        return False

    def _task_done(self, batch: Batch, task: asyncio.Task) -> None:
        if task.cancelled():
            # We cancel a task once all its requests are cancelled, or once
            # unload has answered them all; any other cancellation came from
            # inside the model (an awaited task cancelled, CancelledError
            # raised): a failure of execute(), not a cancelled request.
            if all(r.is_cancelled() or _seam.is_closed(r) for r in batch.requests):
                self._execute_cancelled(batch)
                return
            try:
                task.result()
            except asyncio.CancelledError as e:
                self._execute_failed(batch, e)
            return
        exc = task.exception()
        if exc is not None:
            self._execute_failed(batch, exc)
        else:
            self._execute_returned(batch, task.result())

    def _execute_returned(self, batch: Batch, result: Any) -> None:
        batch.returned = True
        if self.decoupled:
            self._decoupled_returned(batch, result)
        else:
            self._default_returned(batch, result)

    def _decoupled_returned(self, batch: Batch, result: Any) -> None:
        if result is not None:
            self._end_with_error(
                batch,
                f"Python model '{self.names.instance}' is using the decoupled mode and the "
                f"execute function must return None. (tritonpy: it returned "
                f"{type(result).__name__}; answer through the response senders)",
            )
            return
        for req in batch.requests:
            if _seam.rescheduled(req) and self._close(req):
                self._queue(req, None, C.RESP_RESCHEDULE | C.RESP_NO_RESPONSE)
        self.flush()
        self.out.execute_done(batch.id, True)
        self._maybe_forget(batch)

    def _default_returned(self, batch: Batch, result: Any) -> None:
        n = len(batch.given)
        problem = _CheckResult(result, n, batch)
        if problem:
            self._end_with_error(batch, problem)
            return
        ch = self.channel
        if batch.task is not None or ch.more or self.outbox:
            entries = _Answer(batch, result, None, self.own, self.model_name)
            self._maybe_forget(batch)
            if not entries:
                # Every request answered (or to be answered) by its sender.
                self.flush()
                self.out.execute_done(batch.id, True)
                return
            if batch.task is not None:
                # A task's batch: other tasks often end in the same loop
                # iteration, and their batches leave in one frame.
                self._queue_entries(entries)
                return
            # A sync batch runs inside the channel's hand-over of what it
            # read: if it was quick, the batches read with it end in the
            # same frame, sent when the channel has handed them all over.
            self.outbox.put(entries)
            took = _now_ns() - self._started_ns
            typical = self._typical_ns = self._typical_ns + ((took - self._typical_ns) >> 3)
            if took < _QUICK_NS and typical < _QUICK_NS and ch.more and self.hold_answers:
                ch.drained_wanted = True
                return
            self.flush()
            return
        # Alone in its read with nothing waiting: its own frame, at once.
        # (flush() and _forget() written out: every request at low load
        # takes this path.)
        metrics = self.metrics
        if metrics.deletes:
            metrics.flush()  # a client that has its response sees dropped metrics gone
        w = self.out.responses
        w.begin_responses(n, batch.id, True)
        written = _Answer(batch, result, w, self.own, self.model_name)
        if written != n:
            w.set_count(written)  # the others answer through senders
        if batch.open <= 0:
            self.batches.pop(batch.id, None)
            batch.requests = batch.given = ()
        self.out.send_built(w)

    def _execute_failed(self, batch: Batch, e: BaseException) -> None:
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        # The official backend's log line, then the traceback.
        self._log(2, _execute_failed_text(self.names.instance, f"{type(e).__name__}: {e}\n{tb}"))
        ids = ", ".join(f"'{r.request_id()}'" for r in batch.given[:8])
        self._end_with_error(
            batch,
            f"{type(e).__name__}: {e}\n\ntritonpy: model '{self.model_name}', "
            f"request(s) {ids}: execute() raised it:\n{tb}",
        )

    def _execute_cancelled(self, batch: Batch) -> None:
        """Every request of an async batch was cancelled and so was its task:
        the requests still open end with CANCELLED."""
        batch.returned = True
        for req in batch.requests:
            if self._close(req):
                err = pb_utils.TritonError(
                    f"request '{req.request_id()}' to model '{self.model_name}' was cancelled",
                    _CANCELLED,
                )
                self._queue(req, _Response(error=err), C.RESP_FINAL)
        self.flush()
        if self.decoupled:
            self.out.execute_done(batch.id, True)
            self._maybe_forget(batch)
        else:
            # Every request already has its final entry: end the batch.
            w = self.out.responses
            w.begin_responses(0, batch.id, True)
            self.out.send_built(w)
            self._forget(batch)

    def _end_with_error(self, batch: Batch, message: str) -> None:
        """``execute`` failed: every request of the batch still open fails
        with ``message``, after the official backend's words."""
        batch.returned = True
        for req in batch.requests:
            _seam.close(req)
        self.flush()
        self.out.execute_done(batch.id, False, _execute_failed_text(self.names.instance, message))
        self._forget(batch)

    def unanswered(self, req: Any) -> str:
        """The error of a default-mode request that execute() returned no
        response for and whose response sender it never took."""
        return _execute_failed_text(
            self.names.instance,
            f"tritonpy: execute() returned no response for request '{req.request_id()}' and "
            "did not take its response sender (request.get_response_sender()): nothing "
            "can answer it",
        )

    def _maybe_forget(self, batch: Batch) -> None:
        if batch.returned and batch.open <= 0:
            self._forget(batch)

    def _forget(self, batch: Batch) -> None:
        """The batch is over: every request is complete."""
        self.batches.pop(batch.id, None)
        batch.requests = batch.given = ()

    def _close(self, req: Any) -> bool:
        """Mark the request complete; False if it already was."""
        return _seam.close(req)

    # ---------------------------------------------------------------- senders

    def send(self, req: Any, response: Any, flags: int) -> None:
        """InferenceResponseSender.send(), checked by the sender: called
        from any thread, during execute() or after it returned."""
        schedule, done = self.outbox.send(req, response, flags, self.own, self.model_name)
        if schedule:
            self._call_on_loop(self.flush)
        if done:
            self._call_on_loop(self._maybe_forget, _seam.batch_of(req))

    def broke_rule(self, req: Any, message: str) -> NoReturn:
        """A default-mode sender was asked for a second response, or for the
        final flag before any response: the request, if still open, ends with
        that error (so its client is not left waiting), and send() raises."""
        if self._close(req):
            # What the official backend answers once the exception has left
            # execute(), which is where it usually goes.
            text = _execute_failed_text(
                self.names.instance,
                f"TritonModelException: {message}\n\ntritonpy: request '{req.request_id()}' "
                "ends with this error",
            )
            if _seam.batch_of(req).returned:
                self._log(2, text)  # nobody catches what send() raises now
            self._queue(req, _Response(error=pb_utils.TritonError(text)), C.RESP_FINAL)
            self._call_on_loop(self._maybe_forget, _seam.batch_of(req))
        raise pb_utils.TritonModelException(message)

    def _queue(self, req: Any, response: Any, wire_flags: int) -> None:
        self._queue_entries((_Entry(req, response, wire_flags, 0, self.own, self.model_name),))

    def _queue_entries(self, entries: Any) -> None:
        if self.outbox.put(entries):
            self._call_on_loop(self.flush)

    def _call_on_loop(self, fn: Any, *args: Any) -> None:
        self.turns.soon(fn, *args)

    def drained(self) -> None:
        """The channel has handed over every message of its last read (in
        a thread reading in turn, maybe)."""
        if threading.get_ident() == self._loop_thread:
            self.flush()
        else:
            self.turns.soon(self.flush)

    def flush(self) -> None:
        """Send every pending entry, as few RESPONSES frames as fit."""
        metrics = self.metrics
        if metrics.deletes:
            metrics.flush()  # a client that has its response sees dropped metrics gone
        if not self.outbox:
            # Unlocked peek: an entry queued after it schedules a flush of
            # its own.
            return
        pending = self.outbox.take()
        out = self.out
        w = out.responses
        i = 0
        while i < len(pending):
            w.begin_responses()
            end = _WriteEntries(w, pending, i)
            w.set_count(end - i)
            i = end
            out.send_built(w)

    # ---------------------------------------------------------------- cancellation

    def on_cancel(self, items: list[tuple[int, int]]) -> None:
        if threading.get_ident() != self._loop_thread:
            # Read in turn while model code holds the loop thread: the
            # flags now (a sync execute polling is_cancelled() sees them),
            # the callbacks and task cancellations on the loop.
            for batch_id, index in items:
                batch = self.batches.get(batch_id)
                if batch is not None and index < len(batch.requests):
                    _seam.set_cancelled(batch.requests[index])
            self.loop.call_soon_threadsafe(self.on_cancel, items)
            return
        touched = []
        for batch_id, index in items:
            batch = self.batches.get(batch_id)
            if batch is None or index >= len(batch.requests):
                continue  # already complete: nothing to tell
            req = batch.requests[index]
            try:
                _seam.cancel(req)
            except Exception:  # noqa: BLE001 - a callback's error must not stop the others
                self._log(
                    2,
                    f"model '{self.model_name}': a cancel callback raised:\n"
                    f"{traceback.format_exc()}",
                )
            touched.append(batch)
        for batch in touched:
            task = batch.task
            if (
                task is not None
                and not task.done()
                and all(r.is_cancelled() for r in batch.requests)
            ):
                task.cancel()

    def on_send_error(self, batch_id: int, index: int, code: int, message: str) -> None:
        batch = self.batches.get(batch_id)
        if batch is not None and index < len(batch.requests):
            _seam.send_failed(batch.requests[index], message)

    # ---------------------------------------------------------------- shutdown

    async def drain(self, grace: float) -> None:
        """Give work in flight ``grace`` seconds, then cancel it and end every
        open request with UNAVAILABLE (used on unload)."""
        deadline = self.loop.time() + grace
        while self.batches and self.loop.time() < deadline:
            await asyncio.sleep(0.01)
        # First answer every open request, so each client learns why; then
        # stop the work (a cancelled task finds its requests already closed).
        for batch in list(self.batches.values()):
            for req in batch.requests:
                if self._close(req):
                    err = pb_utils.TritonError(
                        f"model '{self.model_name}' was unloaded with request "
                        f"'{req.request_id()}' in flight",
                        _UNAVAILABLE,
                    )
                    self._queue(req, _Response(error=err), C.RESP_FINAL)
        self.flush()
        tasks = [b.task for b in self.batches.values() if b.task is not None and not b.task.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        for batch in list(self.batches.values()):
            if not batch.returned:
                batch.returned = True
                self.out.execute_done(batch.id, True)
        self.flush()
        for batch in list(self.batches.values()):
            self._forget(batch)


async def _await(aw: Any) -> Any:
    return await aw
