# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Execute batches, response senders and cancellation, on the stub's loop.

Every batch is a ``_Batch``. A sync ``execute`` runs inline, one batch at a
time (the backend sends the next one when this one is over); an
``async def execute`` runs as a task, so many batches are in flight at once.

Responses leave in two ways:
- default mode, returned from ``execute``: one RESPONSES frame with
  BATCH_DONE when the batch is over;
- sent through a response sender (decoupled mode, or default mode answering
  early): encoded at once into the pending list, which is flushed as one
  coalesced RESPONSES frame per loop iteration, from whichever thread sent.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import traceback
import types
from typing import Any

import numpy as np

from tritonpy import pb_utils
from tritonpy.pb_utils import _core
from tritonpy.stub import _codec as C

_Response = pb_utils.InferenceResponse
_TensorFromStub = _core.from_stub
_RequestFromStub = _core.request_from_stub
_RESCHEDULE = pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
_CANCELLED = pb_utils.TritonError.CANCELLED
_Coroutine = types.CoroutineType
_UNAVAILABLE = pb_utils.TritonError.UNAVAILABLE
# Bytes kept free in a frame for the fixed part of an entry or a tensor.
_ENTRY_RESERVE = 1024


class _Batch:
    __slots__ = (
        "id",
        "engine",
        "requests",
        "buf",
        "task",
        "returned",
        "open",
        "answers",
        "arena_inputs",
    )

    def __init__(self, batch_id: int, engine: Engine, requests: list[Any], buf: Any) -> None:
        self.id = batch_id
        self.engine = engine  # where the requests' senders send
        # Emptied when the batch is forgotten: the requests point at their
        # batch, so this edge would make every batch a reference cycle,
        # left to the cyclic collector.
        self.requests: list[Any] | tuple[()] = requests
        self.buf = buf  # keeps inline input bytes alive
        self.task: asyncio.Task | None = None
        self.returned = False
        self.open = len(requests)  # requests not yet complete
        # Default mode: responses given to a sender, kept until the batch ends.
        self.answers: dict[int, Any] | None = None
        # Inputs in backend arenas: (first address, end address, arena id,
        # offset), so that an output made of their bytes can be sent by
        # reference (location 2) instead of copied.
        self.arena_inputs: list[tuple[int, int, int, int]] | None = None


class Engine:
    def __init__(self, stub: Any) -> None:
        self.stub = stub
        self.loop: asyncio.AbstractEventLoop = stub.loop
        self.channel = stub.channel
        self.own = stub.own
        self.model_name = stub.model_name
        self.model: Any = None
        self.decoupled = False
        self.batches: dict[int, _Batch] = {}
        self.writer = C.FrameWriter()
        self._lock = threading.Lock()
        self._pending: list[tuple] = []
        self._announce: list[tuple[int, int, int]] = []
        self._flush_scheduled = False
        self._loop_thread = threading.get_ident()

    # ---------------------------------------------------------------- execute

    def on_execute(self, batch_id: int, wire: list[tuple], buf: Any) -> None:
        requests: list[Any] = []
        batch = _Batch(batch_id, self, requests, buf)
        view = memoryview(buf)
        peer = self.stub.peer
        for index, (rid, corr, flags, timeout, params, names, tensors) in enumerate(wire):
            inputs = []
            for name, dtype, dims, nbytes, loc, a, b in tensors:
                if loc == C.LOC_INLINE:
                    data = view[a : a + nbytes]
                else:
                    data = peer.view(a, b, nbytes)
                    if batch.arena_inputs is None:
                        batch.arena_inputs = []
                    start = peer.address(a) + b
                    batch.arena_inputs.append((start, start + nbytes, a, b))
                inputs.append(_TensorFromStub(name, dtype, dims, data))
            req = _RequestFromStub(
                self.model_name,
                rid,
                0 if corr is None else corr,
                flags,
                timeout,
                params,
                names,
                inputs,
                batch,
                index,
            )
            requests.append(req)
        if batch_id in self.batches:
            raise C.ProtocolError(f"batch id {batch_id} is already in flight")
        self.batches[batch_id] = batch
        try:
            result = self.model.execute(requests)
        except Exception as e:  # noqa: BLE001 - the model's error goes to its requests
            self._execute_failed(batch, e)
            return
        if type(result) is not list and inspect.isawaitable(result):
            # A coroutine (the usual ``async def execute``) becomes the task
            # itself; other awaitables get a wrapper coroutine.
            coro = result if type(result) is _Coroutine else _await(result)
            batch.task = self.loop.create_task(coro)
            batch.task.add_done_callback(lambda t: self._task_done(batch, t))
            return
        self._execute_returned(batch, result)

    def _task_done(self, batch: _Batch, task: asyncio.Task) -> None:
        if task.cancelled():
            self._execute_cancelled(batch)
            return
        exc = task.exception()
        if exc is not None:
            self._execute_failed(batch, exc)
        else:
            self._execute_returned(batch, task.result())

    def _execute_returned(self, batch: _Batch, result: Any) -> None:
        batch.returned = True
        if self.decoupled:
            self._decoupled_returned(batch, result)
        else:
            self._default_returned(batch, result)

    def _decoupled_returned(self, batch: _Batch, result: Any) -> None:
        if result is not None:
            self._end_with_error(
                batch,
                (
                    f"tritonpy: model '{self.model_name}' is decoupled: execute() must return "
                    f"None and answer through response senders, it returned "
                    f"{type(result).__name__}"
                ),
            )
            return
        for req in batch.requests:
            if req._release_flags & _RESCHEDULE and self._close(req):
                self._queue(req, None, C.RESP_RESCHEDULE | C.RESP_NO_RESPONSE)
        self.flush()
        self.channel.send(C.encode_simple(C.EXECUTE_DONE, (1, ""), batch.id))
        self._maybe_forget(batch)

    def _default_returned(self, batch: _Batch, result: Any) -> None:
        n = len(batch.requests)
        if result is None and batch.answers is not None and len(batch.answers) == n:
            result = [batch.answers[i] for i in range(n)]
        problem = _check_result(result, n, batch)
        if problem:
            self._end_with_error(
                batch,
                f"tritonpy: model '{self.model_name}': {problem}; every request of the batch fails",
            )
            return
        coalesce = batch.task is not None
        if not coalesce:
            self.flush()  # anything sent earlier goes first
        w = self.writer
        entries = []
        if not coalesce:
            w.begin(C.RESPONSES, batch.id, C.FLAG_BATCH_DONE)
            w.u32(n)
        for i, (req, resp) in enumerate(zip(batch.requests, result, strict=True)):
            flags = C.RESP_FINAL
            if req._release_flags & _RESCHEDULE:
                flags = C.RESP_RESCHEDULE
                if resp is None:
                    flags |= C.RESP_NO_RESPONSE
            # By reference: the backend copies these outputs before it ends
            # the batch, and execute() has returned, so nothing changes them.
            if coalesce:
                if i == n - 1:
                    flags |= C.RESP_BATCH_END
                entries.append(self._entry(req, resp, flags, 0, by_ref=True))
            else:
                w.entry(self._entry(req, resp, flags, w.size(), by_ref=True))
            req._done = True
        self._forget(batch)
        if coalesce:
            # A task's batch: other tasks often end in the same loop
            # iteration, and their batches leave in one frame.
            self._queue_entries(entries)
        else:
            self._send_frame(w)

    def _execute_failed(self, batch: _Batch, e: BaseException) -> None:
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        ids = ", ".join(f"'{r.request_id()}'" for r in batch.requests[:8])
        self._end_with_error(
            batch,
            f"tritonpy: model '{self.model_name}', request(s) {ids}: "
            f"execute() raised {type(e).__name__}: {e}\n{tb}",
        )

    def _execute_cancelled(self, batch: _Batch) -> None:
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
            self.channel.send(C.encode_simple(C.EXECUTE_DONE, (1, ""), batch.id))
            self._maybe_forget(batch)
        else:
            # Every request already has its final entry: end the batch.
            w = self.writer
            w.begin(C.RESPONSES, batch.id, C.FLAG_BATCH_DONE)
            w.u32(0)
            self._send_frame(w)
            self._forget(batch)

    def _end_with_error(self, batch: _Batch, message: str) -> None:
        batch.returned = True
        for req in batch.requests:
            req._done = True
        self.flush()
        self.channel.send(C.encode_simple(C.EXECUTE_DONE, (0, message), batch.id))
        self._forget(batch)

    def _maybe_forget(self, batch: _Batch) -> None:
        if batch.returned and batch.open <= 0:
            self._forget(batch)

    def _forget(self, batch: _Batch) -> None:
        """The batch is over: every request is complete."""
        self.batches.pop(batch.id, None)
        batch.requests = ()

    def _close(self, req: Any) -> bool:
        """Mark the request complete; False if it already was."""
        with self._lock:
            if req._done:
                return False
            req._done = True
            req._batch.open -= 1
        return True

    # ---------------------------------------------------------------- senders

    def send(self, req: Any, response: Any, flags: int) -> None:
        """InferenceResponseSender.send(): called from any thread."""
        batch = req._batch
        if not self.decoupled:
            self._default_send(req, response, flags)
            return
        wire_flags = C.RESP_FINAL if flags & 1 else 0
        if response is None:
            wire_flags |= C.RESP_NO_RESPONSE
        self._queue(req, response, wire_flags)
        if flags & 1:
            with self._lock:
                batch.open -= 1
                done = batch.returned and batch.open <= 0
            if done:
                self._call_on_loop(self._maybe_forget, batch)

    def _default_send(self, req: Any, response: Any, flags: int) -> None:
        batch = req._batch
        if response is None or not flags & 1 or req._sent > 1:
            req._done = True
            raise pb_utils.TritonModelException(
                f"model '{self.model_name}' is not decoupled: request '{req.request_id()}' "
                "takes exactly one response, sent with the final flag"
            )
        if batch.answers is None:
            batch.answers = {}
        batch.answers[req._index] = response

    def _queue(self, req: Any, response: Any, wire_flags: int) -> None:
        self._queue_entries((self._entry(req, response, wire_flags, 0),))

    def _queue_entries(self, entries: Any) -> None:
        with self._lock:
            self._pending.extend(entries)
            if self._flush_scheduled:
                return
            self._flush_scheduled = True
        self._call_on_loop(self.flush)

    def _call_on_loop(self, fn: Any, *args: Any) -> None:
        if threading.get_ident() == self._loop_thread:
            self.loop.call_soon(fn, *args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def announce(self, arena_id: int, size: int, fd: int) -> None:
        """OwnArenas made a new arena (maybe in a user thread): it is sent
        before the next frame, which may refer to it."""
        with self._lock:
            self._announce.append((arena_id, size, fd))

    def _send_announcements(self) -> None:
        # Unlocked peek: whoever allocated an arena appended its announcement
        # under the lock before the frames that refer to it were handed over
        # (under the same lock, or in this thread).
        if not self._announce:
            return
        with self._lock:
            items, self._announce = self._announce, []
        for arena_id, size, fd in items:
            self.channel.send(C.encode_simple(C.ARENA, (arena_id, size)), (fd,))

    def flush(self) -> None:
        """Send every pending entry, as few RESPONSES frames as fit."""
        metrics = self.stub.metrics
        if metrics.dirty or metrics.deletes:
            metrics.flush()  # a client that has its response sees its metrics
        with self._lock:
            pending, self._pending = self._pending, []
            self._flush_scheduled = False
        if not pending:
            return
        w = self.writer
        i = 0
        while i < len(pending):
            w.begin(C.RESPONSES, 0, 0)
            count_at = w.size()
            w.u32(0)
            n = 0
            while i < len(pending):
                entry = pending[i]
                if n and w.size() + _entry_size(entry) > C.MAX_FRAME:
                    break
                w.entry(entry)
                n += 1
                i += 1
            w.patch_u32(count_at, n)
            self._send_frame(w)

    def _send_frame(self, w: C.FrameWriter) -> None:
        self._send_announcements()
        if w.size() > C.MAX_FRAME:
            body = w.body_bytes()
            aid, off, view = self.own.alloc(len(body))
            view[:] = body
            self._send_announcements()
            frame = w.finish_in_arena(aid, off)
        else:
            frame = w.finish()
        self.channel.send(frame)

    # ---------------------------------------------------------------- entries

    def _entry(
        self, req: Any, resp: Any, flags: int, frame_size: int, by_ref: bool = False
    ) -> tuple:
        """An entry ready to write: outputs already copied (inline bytes or
        an arena allocation), so the model may reuse its arrays at once. A
        bad output turns the entry into an error for this request alone.
        With ``by_ref`` (a batch whose execute() has returned), a large
        output lying inside an input of the request's batch in a backend
        arena is sent as a reference to it instead (location 2)."""
        batch_id, index = req._batch.id, req._index
        if resp is None or flags & C.RESP_NO_RESPONSE:
            return (batch_id, index, flags | C.RESP_NO_RESPONSE, None, "", ())
        if resp.has_error():
            err = resp.error()
            return (batch_id, index, flags, (int(err.code()), err.message()), "", ())
        try:
            params = resp._parameters_json()
            outputs = self._prepare_outputs(req, resp, frame_size, by_ref)
        except Exception as e:  # noqa: BLE001
            msg = f"model '{self.model_name}', request '{req.request_id()}': {e}"
            return (batch_id, index, flags, (int(pb_utils.TritonError.INVALID_ARG), msg), "", ())
        return (batch_id, index, flags, None, params, outputs)

    def _prepare_outputs(self, req: Any, resp: Any, frame_size: int, by_ref: bool) -> tuple:
        wanted = req._requested_output_names
        inputs = req._batch.arena_inputs if by_ref else None
        out = []
        budget = C.MAX_FRAME - frame_size - _ENTRY_RESERVE
        allocated: list[tuple[int, int]] = []
        try:
            for t in resp.output_tensors():
                if wanted and t._name not in wanted:
                    continue
                small = t._small_wire_bytes(C.INLINE_LIMIT)
                if small is not None and len(small[1]) + 128 <= budget:
                    n = len(small[1])
                    budget -= n + 128
                    out.append((t._name, t._dtype, small[0], small[1], 0, 0, n, C.LOC_INLINE))
                    continue
                try:
                    name, dtype, dims, data = t._to_wire()
                    mv = memoryview(data)
                    if mv.format != "B" or mv.ndim != 1:
                        mv = mv.cast("B")
                except Exception as e:  # noqa: BLE001
                    raise ValueError(f"output '{t.name()}': {e}") from e
                n = mv.nbytes
                if n <= C.INLINE_LIMIT and n + 128 <= budget:
                    budget -= n + 128
                    out.append((name, dtype, tuple(dims), bytes(mv), 0, 0, n, C.LOC_INLINE))
                    continue
                budget -= 128
                ref = _find_input(inputs, mv) if inputs else None
                if ref is not None:
                    out.append(
                        (name, dtype, tuple(dims), None, ref[0], ref[1], n, C.LOC_RECEIVER_ARENA)
                    )
                    continue
                aid, off, view = self.own.alloc(n)
                allocated.append((aid, off))
                view[:] = mv
                out.append((name, dtype, tuple(dims), None, aid, off, n, C.LOC_ARENA))
        except BaseException:
            for aid, off in allocated:
                self.own.free(aid, off)
            raise
        return tuple(out)

    # ---------------------------------------------------------------- cancellation

    def on_cancel(self, items: list[tuple[int, int]]) -> None:
        touched = []
        for batch_id, index in items:
            batch = self.batches.get(batch_id)
            if batch is None or index >= len(batch.requests):
                continue  # already complete: nothing to tell
            req = batch.requests[index]
            try:
                req._cancel()
            except Exception:  # noqa: BLE001 - a callback's error must not stop the others
                self.stub.log(
                    2,
                    f"model '{self.model_name}': a cancel callback raised:\n"
                    f"{traceback.format_exc()}",
                )
            touched.append(batch)
        for batch in touched:
            task = batch.task
            if task is not None and not task.done() and all(r._cancelled for r in batch.requests):
                task.cancel()

    def on_send_error(self, batch_id: int, index: int, code: int, message: str) -> None:
        batch = self.batches.get(batch_id)
        if batch is not None and index < len(batch.requests):
            batch.requests[index]._send_error = message

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
                self.channel.send(C.encode_simple(C.EXECUTE_DONE, (1, ""), batch.id))
        self.flush()
        for batch in list(self.batches.values()):
            self._forget(batch)


def _find_input(inputs: list[tuple[int, int, int, int]], mv: memoryview) -> tuple[int, int] | None:
    """(arena id, offset) of ``mv``'s bytes if they lie inside one of
    ``inputs`` (see _Batch.arena_inputs), else None."""
    if not mv.nbytes:
        return None
    addr = np.frombuffer(mv, np.uint8).ctypes.data
    end = addr + mv.nbytes
    for start, stop, aid, off in inputs:
        if start <= addr and end <= stop:
            return aid, off + (addr - start)
    return None


def _entry_size(entry: tuple) -> int:
    size = 64 + len(entry[4]) + (len(entry[3][1]) if entry[3] else 0)
    for name, _dtype, dims, data, _aid, _off, n, _loc in entry[5]:
        size += 64 + len(name) + 8 * len(dims) + (n if data is not None else 0)
    return size


def _check_result(result: Any, n: int, batch: _Batch) -> str:
    if not isinstance(result, (list, tuple)):
        return (
            f"execute() must return a list of pb_utils.InferenceResponse, "
            f"got {type(result).__name__}"
        )
    if len(result) != n:
        return f"execute() returned {len(result)} responses for a batch of {n} requests"
    for i, r in enumerate(result):
        if r is None and batch.requests[i]._release_flags & _RESCHEDULE:
            continue
        if not isinstance(r, _Response):
            return (
                f"element {i} of execute()'s result is a {type(r).__name__}, "
                "not a pb_utils.InferenceResponse"
            )
    return ""


async def _await(aw: Any) -> Any:
    return await aw
