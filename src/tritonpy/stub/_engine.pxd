# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
# The request path's core (_engine.pyx), declared: what it holds and what
# it does, in C. Python reaches it through its def methods (_engine.pyi):
# the channel hands it every frame (on_frame, drained), the life cycle
# gives it the model (serve), response senders send through it.

from libc.stdint cimport uint8_t

from tritonpy.pb_utils._seam cimport RequestCore, ResponsesCore

from tritonpy.stub._batch cimport Batch, Outbox
from tritonpy.stub._codec cimport FrameWriter


# A ResponsesCore: response senders reach send_response in C.
cdef class Engine(ResponsesCore):
    # The parts it works with, given when it is built.
    cdef readonly object loop
    cdef readonly object out  # Outbound: every frame it sends
    cdef readonly object own  # out.own: the stub's arenas
    cdef readonly object turns  # who has the channel (stub/turns.py)
    cdef readonly object peer  # the backend's arenas: where inputs may be
    cdef readonly object metrics  # its queued deletions go before responses
    cdef readonly object names
    cdef object _log
    cdef readonly object life  # the Lifecycle: the handlers of the other frames
    cdef object on_descriptor  # (type, view, fds) of ARENA and BLS_ARENA
    cdef object fatal  # (message): a protocol violation, the stub leaves
    # The model and how it answers (serve()); its name, read per request.
    cdef readonly object model_name
    cdef readonly object model
    # ``decoupled``: ResponsesCore's, read by every response sender's send()
    cdef readonly bint hold_answers
    # Batches in flight by id, and the entries waiting for the next flush
    # (from any thread).
    cdef readonly dict batches
    cdef readonly Outbox outbox
    cdef FrameWriter writer  # RESPONSES frames, written by whoever has the channel
    cdef readonly long batches_total  # received so far (debug counters)
    # EXECUTE frames read in turn while model code held the loop thread.
    cdef unsigned long loop_thread
    cdef object queued  # deque of (id, body, buffer)
    cdef bint executing  # inside _take_execute's loop: it takes the queued ones
    # The read being handed over: more frames follow the one handled now;
    # its answers wait for ``drained`` (on_frame's answer to the channel).
    cdef bint more
    cdef bint drained_wanted
    cdef long long started_ns  # when the last execute() started
    cdef long long typical_ns  # average time of the sync batches read with others
    cdef readonly object execute_handler

    cdef bint receive(self, const uint8_t* p, Py_ssize_t n, mv, list fds, bint more) except -1
    cdef _frame(self, const uint8_t* p, Py_ssize_t n, mv, list fds)
    cdef _take_execute(self, fid, body, buf)
    cdef _execute(self, batch_id, list wire, buf)
    cdef bint _reject(self, Batch batch) except -1
    cdef _returned(self, Batch batch, result)
    cdef _decoupled_returned(self, Batch batch, result)
    cdef _default_returned(self, Batch batch, result)
    cdef _execute_failed(self, Batch batch, e)
    cdef _execute_cancelled(self, Batch batch)
    cdef _end_with_error(self, Batch batch, message)
    cdef _maybe_forget(self, Batch batch)
    cdef _forget(self, Batch batch)
    cdef send_response(self, RequestCore req, response, int flags)
    cdef _queue(self, RequestCore req, response, unsigned int wire_flags)
    cdef _queue_entries(self, entries)
    cdef _flush_metrics(self)
    cdef _send_built(self, FrameWriter w)
    cpdef flush(self)
