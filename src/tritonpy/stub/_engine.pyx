# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
"""The stub's request path, compiled: every frame the channel reads comes
here first; EXECUTE is handled here, from the frame to its answers, and the
other frames go to the handler the life cycle gives them (runtime.py).

Every batch is a ``Batch`` (_batch.pyx, which builds its requests and
turns its answers into RESPONSES entries). A sync ``execute`` runs inline,
one batch at a time (the backend sends the next one when this one is over);
an ``async def execute`` runs as a task, so many batches are in flight at
once. EXECUTE frames read in turn while model code holds the loop thread
(stub/turns.py) wait here and run in order once it is back.

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

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport uint8_t

from tritonpy.pb_utils._seam cimport RequestCore, ResponsesCore, close_request

from tritonpy.stub._codec cimport FrameWriter, _decode_body, _decode_header
from tritonpy.stub._wire cimport WIRE_MAX_FRAME

from tritonpy.stub._batch cimport (
    SENT_DONE,
    SENT_SCHEDULE,
    Batch,
    Outbox,
    answer,
    check_result,
    entry,
    make_batch,
    write_entries,
)

import asyncio
import collections
import contextlib
import inspect
import os
import time
import traceback
import types
from functools import partial

from tritonpy.pb_utils import _seam
from tritonpy.pb_utils._seam import execute_failed, pb_utils
from tritonpy.stub import _codec as C

cdef object _Response = pb_utils.InferenceResponse
cdef object _TritonError = pb_utils.TritonError
cdef object _CANCELLED = pb_utils.TritonError.CANCELLED
cdef object _UNAVAILABLE = pb_utils.TritonError.UNAVAILABLE
cdef object _INVALID_ARG = pb_utils.TritonError.INVALID_ARG
cdef extern from "Python.h":
    int PyBUF_WRITE

cdef object _Coroutine = types.CoroutineType
cdef object _isawaitable = inspect.isawaitable
cdef object _ProtocolError = C.ProtocolError
cdef object _decode_arena_ref = C.decode_arena_ref
cdef int _EXECUTE = C.EXECUTE
cdef int _ARENA = C.ARENA
cdef int _BLS_ARENA = C.BLS_ARENA
cdef int _FLAG_BODY_IN_ARENA = C.FLAG_BODY_IN_ARENA
cdef Py_ssize_t _HEADER_SIZE = C.HEADER_SIZE
cdef unsigned int _RESP_FINAL = C.RESP_FINAL
cdef unsigned int _RESP_RESCHEDULE = C.RESP_RESCHEDULE
cdef unsigned int _RESP_NO_RESPONSE = C.RESP_NO_RESPONSE
# What a bad frame raises while it is decoded or handled: the stub leaves.
cdef tuple _PROTOCOL_ERRORS = (C.ProtocolError, ValueError, KeyError, UnicodeDecodeError)
# When a batch's execute() started; a module global, so that a test model
# can make the time of its batches what it says.
_now_ns = time.monotonic_ns
# A sync batch's answers wait for the batches read with it only when it
# took less than this and so did the model's batches lately (an average
# weighing the newest 1/8): a model whose batches are quick loses nothing
# by it, one with slow batches would make answers already made wait for
# them. An average, not the last slow batch: on a busy machine a quick
# batch preempted for a time slice takes milliseconds now and then. (A
# module global too: a test may count every batch as quick.)
_QUICK_NS = 1_000_000


cdef class Engine:
    """The request path of one stub (its fields: _engine.pxd). Built with
    every part it works with; ``serve()`` gives it the model once
    initialize() has returned."""

    def __init__(self, loop, out, turns, peer, metrics, names, log, life, on_descriptor,
                 fatal):
        """``out``: the Outbound (frames, our arenas); ``turns``: who has
        the channel; ``peer``: the backend's arenas, where inputs may be;
        ``metrics``: its queued deletions go before responses; ``names``:
        the model's names; ``log``: TritonLog; ``life``: the Lifecycle,
        whose handlers take the frames but EXECUTE;
        ``on_descriptor(type, view, fds)``: a frame carrying descriptors;
        ``fatal(message)``: a protocol violation, the stub leaves."""
        self.loop = loop
        self.out = out
        self.own = out.own
        self.turns = turns
        self.peer = peer
        self.metrics = metrics
        self.names = names
        self._log = log.log
        self.life = life
        self.on_descriptor = on_descriptor
        self.fatal = fatal
        self.model_name = names.model
        self.model = None
        self.decoupled = False
        self.hold_answers = False
        self.batches = {}
        self.outbox = Outbox()
        # Where RESPONSES frames are written (by whoever has the channel).
        self.writer = FrameWriter()
        self.loop_thread = PyThread_get_thread_ident()
        self.queued = collections.deque()
        self.executing = False
        self.batches_total = 0
        self.more = False
        self.drained_wanted = False
        self.started_ns = 0
        self.typical_ns = 0
        # What the life cycle's table holds for EXECUTE where a state takes
        # it: the one handler on_frame calls in C.
        self.execute_handler = self.on_execute

    def serve(self, model, bint decoupled, bint hold_answers):
        """initialize() has returned ``model``: execute batches on it, in
        ``decoupled`` mode or not; with ``hold_answers``, answers of sync
        batches read together wait for each other (not when an execute
        timeout counts each batch's time)."""
        self.model = model
        self.decoupled = decoupled
        self.hold_answers = hold_answers

    def named(self, model_name):
        """The model's name, read per request (INIT and AUTO_COMPLETE give it)."""
        self.model_name = model_name

    # ---------------------------------------------------------------- frames

    def on_frame(self, mv, list fds, bint more):
        """The channel's callback: one frame (``more``: others of the same
        read follow), maybe read in turn by another thread while the loop
        is away (stub/turns.py). True when this read's answers wait for
        ``drained``. (The socket's Channel calls ``receive`` in C.)"""
        cdef Py_buffer view
        PyObject_GetBuffer(mv, &view, PyBUF_SIMPLE)
        try:
            return self.receive(<const uint8_t*>view.buf, view.len, mv, fds, more)
        finally:
            PyBuffer_Release(&view)

    cdef bint receive(self, const uint8_t* p, Py_ssize_t n, mv, list fds, bint more) except -1:
        """on_frame for the ``n`` bytes at ``p``, valid until the handler
        runs; ``mv``, a view of them, or None (made when a handler needs
        one)."""
        self.more = more
        self.drained_wanted = False
        try:
            self._frame(p, n, mv, fds)
        except _PROTOCOL_ERRORS as e:
            for fd in fds:  # the descriptors of a bad frame are nobody's
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.fatal(f"protocol error: {e}")
        finally:
            self.more = False
        return self.drained_wanted

    cdef _frame(self, const uint8_t* p, Py_ssize_t n, mv, list fds):
        cdef int ftype
        cdef int flags
        cdef Py_buffer view
        ftype, flags, fid, body_len = _decode_header(p, n)
        if mv is None and (ftype != _EXECUTE or flags & _FLAG_BODY_IN_ARENA or fds):
            mv = PyMemoryView_FromMemory(<char*>p, n, PyBUF_WRITE)
        if fds or ftype == _ARENA or ftype == _BLS_ARENA:
            self.on_descriptor(ftype, mv, fds)
            return
        cdef dict handlers = self.life.handlers
        handler = handlers.get(ftype)
        if handler is None:
            raise _ProtocolError(f"frame type {ftype} is not sent to the stub")
        if flags & _FLAG_BODY_IN_ARENA:
            aid, off = _decode_arena_ref(mv)
            try:
                buf = self.peer.view(aid, off, body_len)
            except self.peer.Unmapped as e:
                if ftype != _EXECUTE:
                    raise
                # Its requests cannot be read: the batch fails alone.
                self.out.execute_done(fid, False, f"tritonpy: {self.names.instance}: {e}")
                return
            start = 0
        elif ftype == _EXECUTE:
            # Inputs are zero-copy views of the frame: give the batch its own copy.
            buf, start = PyByteArray_FromStringAndSize(<const char*>p, n), _HEADER_SIZE
        else:
            buf, start = mv, _HEADER_SIZE
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            body = _decode_body(ftype, <const uint8_t*>view.buf, view.len, start)
        finally:
            PyBuffer_Release(&view)
        if handler is self.execute_handler:
            self._take_execute(fid, body, buf)
        else:
            handler(fid, body, buf)

    def on_execute(self, fid, body, buf):
        """The EXECUTE handler of the states that take it."""
        self._take_execute(fid, body, buf)

    cdef _take_execute(self, fid, body, buf):
        # Taken in INITIALIZING too: read in turn while initialize() runs
        # (the backend sends none before INIT_DONE, a test may), queued.
        queued = self.queued
        if self.turns.away or PyThread_get_thread_ident() != self.loop_thread:
            # Read in turn while model code holds the loop thread (the
            # backend sends a sync model's next batches ahead): they run
            # in order on the loop thread once it is back. The thread
            # decides too: the loop thread clears `away` before it waits
            # for the deputy's turn to end, and a batch the deputy ran
            # itself would wait for its own lock. Always woken: a batch
            # queued as the loop thread's run ends would else wait there.
            queued.append((fid, body, buf))
            self.loop.call_soon_threadsafe(self._run_queued)
            return
        if queued:
            queued.append((fid, body, buf))
            fid, body, buf = queued.popleft()
        self.executing = True
        try:
            while True:
                self._execute(fid, body, buf)
                if not queued:
                    return
                fid, body, buf = queued.popleft()
        finally:
            self.executing = False

    def _run_queued(self):
        if self.queued and not self.executing and not self.turns.away:
            # The newest, handed to _take_execute, goes back behind the
            # others, which run first, in order. The state decides again:
            # initialize() may have failed meanwhile.
            try:
                self.life.handlers[_EXECUTE](*self.queued.pop())
            except _PROTOCOL_ERRORS as e:
                self.fatal(f"protocol error: {e}")

    # ---------------------------------------------------------------- execute

    cdef _execute(self, batch_id, list wire, buf):
        cdef Batch batch = make_batch(batch_id, wire, buf, self.peer, self.model_name)
        if batch_id in self.batches:
            raise _ProtocolError(f"batch id {batch_id} is already in flight")
        self.batches[batch_id] = batch
        self.batches_total += 1
        if batch.rejected is not None and not self._reject(batch):
            return
        self.started_ns = _now_ns()
        try:
            # The loop is back before the answers go, so that what model
            # code posted goes first.
            result = self.turns.execute(self.model, batch.given)
        except BaseException as e:  # noqa: BLE001 - any error of the model goes to its requests
            self._execute_failed(batch, e)
            return
        if type(result) is not list and _isawaitable(result):
            # A coroutine (the usual ``async def execute``) becomes the task
            # itself; other awaitables get a wrapper coroutine.
            coro = result if type(result) is _Coroutine else _await(result)
            batch.task = self.loop.create_task(coro)
            batch.task.add_done_callback(partial(self._task_done, batch))
            return
        self._returned(batch, result)

    cdef bint _reject(self, Batch batch) except -1:
        """The requests of ``batch`` whose inputs the stub cannot take fail
        alone, with INVALID_ARG; execute() gets the others. False when none
        is left (the batch is over)."""
        cdef RequestCore req
        for req, why in batch.rejected or ():
            if close_request(req):
                self._queue(req, _Response(error=_TritonError(why, _INVALID_ARG)), _RESP_FINAL)
        batch.given = [r for r in batch.requests if not (<RequestCore>r)._done]
        self.flush()
        if batch.given:
            return True
        batch.returned = True
        self.out.execute_done(batch.id, True)
        self._forget(batch)
        return False

    def _task_done(self, Batch batch, task):
        if task.cancelled():
            # We cancel a task once all its requests are cancelled, or once
            # unload has answered them all; any other cancellation came from
            # inside the model (an awaited task cancelled, CancelledError
            # raised): a failure of execute(), not a cancelled request.
            if all(r.is_cancelled() or (<RequestCore>r)._done for r in batch.requests):
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
            self._returned(batch, task.result())

    cdef _returned(self, Batch batch, result):
        batch.returned = True
        if self.decoupled:
            self._decoupled_returned(batch, result)
        else:
            self._default_returned(batch, result)

    cdef _decoupled_returned(self, Batch batch, result):
        if result is not None:
            self._end_with_error(
                batch,
                f"Python model '{self.names.instance}' is using the decoupled mode and the "
                f"execute function must return None. (tritonpy: it returned "
                f"{type(result).__name__}; answer through the response senders)",
            )
            return
        for req in batch.requests:
            if _seam.rescheduled(req) and close_request(req):
                self._queue(req, None, _RESP_RESCHEDULE | _RESP_NO_RESPONSE)
        self.flush()
        self.out.execute_done(batch.id, True)
        self._maybe_forget(batch)

    cdef _default_returned(self, Batch batch, result):
        cdef Py_ssize_t n = len(batch.given)
        cdef long long took, typical, quick
        cdef FrameWriter w
        problem = check_result(result, n, batch)
        if problem:
            self._end_with_error(batch, problem)
            return
        if batch.task is not None or self.more or self.outbox.has_pending():
            entries = answer(batch, result, None, self.own, self.model_name, self.names.instance)
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
            took = _now_ns() - self.started_ns
            typical = self.typical_ns = self.typical_ns + ((took - self.typical_ns) >> 3)
            quick = _QUICK_NS
            if took < quick and typical < quick and self.more and self.hold_answers:
                self.drained_wanted = True
                return
            self.flush()
            return
        # Alone in its read with nothing waiting: its own frame, at once,
        # ended by BATCH_DONE.
        self._flush_metrics()
        w = self.writer
        w.begin_responses(n, batch.id, True)
        written = answer(batch, result, w, self.own, self.model_name, self.names.instance)
        if written != n:
            w.set_count(written)  # the others answer through senders
        self._maybe_forget(batch)
        self._send_built(w)

    cdef _execute_failed(self, Batch batch, e):
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        # The official backend's log line, then the traceback.
        self._log(2, execute_failed(self.names.instance, f"{type(e).__name__}: {e}\n{tb}"))
        ids = ", ".join([f"'{r.request_id()}'" for r in batch.given[:8]])
        self._end_with_error(
            batch,
            f"{type(e).__name__}: {e}\n\ntritonpy: model '{self.model_name}', "
            f"request(s) {ids}: execute() raised it:\n{tb}",
        )

    cdef _execute_cancelled(self, Batch batch):
        """Every request of an async batch was cancelled and so was its task:
        the requests still open end with CANCELLED."""
        cdef FrameWriter w
        batch.returned = True
        for req in batch.requests:
            if close_request(req):
                err = _TritonError(
                    f"request '{req.request_id()}' to model '{self.model_name}' was cancelled",
                    _CANCELLED,
                )
                self._queue(req, _Response(error=err), _RESP_FINAL)
        self.flush()
        if self.decoupled:
            self.out.execute_done(batch.id, True)
            self._maybe_forget(batch)
        else:
            # Every request already has its final entry: end the batch.
            w = self.writer
            w.begin_responses(0, batch.id, True)
            self._send_built(w)
            self._forget(batch)

    cdef _end_with_error(self, Batch batch, message):
        """``execute`` failed: every request of the batch still open fails
        with ``message``, after the official backend's words."""
        batch.returned = True
        for req in batch.requests:
            close_request(req)
        self.flush()
        self.out.execute_done(batch.id, False, execute_failed(self.names.instance, message))
        self._forget(batch)

    def _maybe_forget_later(self, Batch batch):
        self._maybe_forget(batch)

    cdef _maybe_forget(self, Batch batch):
        if batch.returned and batch.open_count() <= 0:
            self._forget(batch)

    cdef _forget(self, Batch batch):
        """The batch is over: every request is complete."""
        self.batches.pop(batch.id, None)
        batch.requests = batch.given = ()

    # ---------------------------------------------------------------- senders

    def send(self, RequestCore req not None, response, int flags):
        """InferenceResponseSender.send(), checked by the sender: called
        from any thread, during execute() or after it returned."""
        self.send_response(req, response, flags)

    cdef send_response(self, RequestCore req, response, int flags):
        # What a sender calls in C (ResponsesCore).
        cdef int sent = self.outbox.send(req, response, flags, self.own, self.model_name)
        if sent & SENT_SCHEDULE:
            self.turns.soon(self.flush)
        if sent & SENT_DONE:
            self.turns.soon(self._maybe_forget_later, req._batch)

    def broke_rule(self, RequestCore req not None, message):
        """A default-mode sender was asked for a second response, or for the
        final flag before any response: the request, if still open, ends with
        that error (so its client is not left waiting), and send() raises."""
        if close_request(req):
            # What the official backend answers once the exception has left
            # execute(), which is where it usually goes.
            text = execute_failed(
                self.names.instance,
                f"TritonModelException: {message}\n\ntritonpy: request '{req.request_id()}' "
                "ends with this error",
            )
            if (<Batch>req._batch).returned:
                self._log(2, text)  # nobody catches what send() raises now
            self._queue(req, _Response(error=_TritonError(text)), _RESP_FINAL)
            self.turns.soon(self._maybe_forget_later, req._batch)
        raise pb_utils.TritonModelException(message)

    cdef _queue(self, RequestCore req, response, unsigned int wire_flags):
        self._queue_entries((entry(req, response, wire_flags, 0, self.own, self.model_name),))

    cdef _queue_entries(self, entries):
        if self.outbox.put(entries):
            self.turns.soon(self.flush)

    def drained(self):
        """The channel has handed over every message of its last read (in
        a thread reading in turn, maybe)."""
        if PyThread_get_thread_ident() == self.loop_thread:
            self.flush()
        else:
            self.turns.soon(self.flush)

    cdef _flush_metrics(self):
        metrics = self.metrics
        if metrics.deletes:
            metrics.flush()  # a client that has its response sees dropped metrics gone

    cdef _send_built(self, FrameWriter w):
        """Send the RESPONSES frame open in ``w``: here when it refers to no
        new arena and fits a frame, else through the Outbound."""
        out = self.out
        if w.pos > WIRE_MAX_FRAME or out.announcing:
            out.send_built(w)
        else:
            out.send(w.finish())

    cpdef flush(self):
        """Send every pending entry, as few RESPONSES frames as fit."""
        cdef Py_ssize_t i = 0
        cdef Py_ssize_t end
        cdef FrameWriter w = self.writer
        self._flush_metrics()
        if not self.outbox.has_pending():
            return
        cdef list pending = self.outbox.take()
        while i < len(pending):
            w.begin_responses()
            end = write_entries(w, pending, i)
            w.set_count(end - i)
            i = end
            self._send_built(w)

    # ---------------------------------------------------------------- cancellation

    def on_cancel(self, items):
        cdef Batch batch
        if PyThread_get_thread_ident() != self.loop_thread:
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
                and all([r.is_cancelled() for r in batch.requests])
            ):
                task.cancel()

    def on_send_error(self, batch_id, index, code, message):
        cdef Batch batch = self.batches.get(batch_id)
        if batch is not None and index < len(batch.requests):
            _seam.send_failed(batch.requests[index], message)

    # ---------------------------------------------------------------- shutdown

    async def drain(self, grace):
        """Give work in flight ``grace`` seconds, then cancel it and end every
        open request with UNAVAILABLE (used on unload)."""
        cdef Batch batch
        deadline = self.loop.time() + grace
        while self.batches and self.loop.time() < deadline:
            await asyncio.sleep(0.01)
        # First answer every open request, so each client learns why; then
        # stop the work (a cancelled task finds its requests already closed).
        for batch in list(self.batches.values()):
            for req in batch.requests:
                if close_request(req):
                    err = _TritonError(
                        f"model '{self.model_name}' was unloaded with request "
                        f"'{req.request_id()}' in flight",
                        _UNAVAILABLE,
                    )
                    self._queue(req, _Response(error=err), _RESP_FINAL)
        self.flush()
        tasks = [
            b.task for b in self.batches.values() if b.task is not None and not b.task.done()
        ]
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


async def _await(aw):
    return await aw
