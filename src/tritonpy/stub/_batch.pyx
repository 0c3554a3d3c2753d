# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
"""What the stub does per request of a batch, compiled: the batch's
requests and input tensors built from a decoded EXECUTE body, and a
default-mode batch's answers checked and made into RESPONSES entries.

The engine (_engine.pyx) decides when these run and what happens next
(tasks, senders, flushing, errors). Requests, tensors and responses are
read and written through their C fields (pb_utils/_core.pxd, cimported
through pb_utils/_seam.pxd), so a request costs no attribute lookups here.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport uint64_t

from tritonpy.pb_utils._seam cimport (
    RequestCore,
    ResponseCore,
    TensorCore,
    close_request,
    dtype_wire_size,
    wire_parts,
)

from tritonpy.stub._codec cimport (
    Entry,
    FrameWriter,
    OutTensor,
    WireRequest,
    WireTensor,
    entry_size,
    make_entry,
    out_arena,
    out_inline,
)
from tritonpy.stub._wire cimport WIRE_INLINE_LIMIT, WIRE_MAX_FRAME

import numpy as np

from tritonpy.pb_utils._seam import (
    DEFAULT_MEMORY,
    ITEMSIZE,
    SEND_SECOND_RESPONSE,
    execute_failed,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    TYPE_BYTES,
    WIRE_NAMES,
    InferenceRequest,
    InferenceResponse,
    Tensor,
    TritonError,
)
from tritonpy.stub import _codec as C

cdef object _request_cls = InferenceRequest
cdef object _tensor_cls = Tensor
cdef object _response_cls = InferenceResponse
cdef object _default_memory = DEFAULT_MEMORY
cdef dict _itemsize = ITEMSIZE
cdef int _TYPE_BYTES = TYPE_BYTES
cdef int _INVALID_ARG = int(TritonError.INVALID_ARG)
cdef long _RESCHEDULE = TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
cdef int _LOC_INLINE = C.LOC_INLINE
cdef int _LOC_ARENA = C.LOC_ARENA
cdef int _LOC_RECEIVER_ARENA = C.LOC_RECEIVER_ARENA
cdef unsigned int _RESP_FINAL = C.RESP_FINAL
cdef unsigned int _RESP_RESCHEDULE = C.RESP_RESCHEDULE
cdef unsigned int _RESP_NO_RESPONSE = C.RESP_NO_RESPONSE
cdef unsigned int _RESP_BATCH_END = C.RESP_BATCH_END
# Bytes kept free in a frame for the fixed part of an entry, and per tensor.
cdef Py_ssize_t _ENTRY_RESERVE = 1024
cdef Py_ssize_t _TENSOR_RESERVE = 128


cdef class Batch:
    """One EXECUTE frame's requests, from the frame until the last of them
    is complete. Each request keeps whether it is complete (RequestCore
    ``_done``, set by close_request only); the batch asks them.

    Its fields (_batch.pxd): ``requests``, emptied when the batch is
    forgotten (the requests point at their batch, so this edge would make
    every batch a reference cycle, left to the cyclic collector);
    ``given``, the requests execute() gets (``requests`` itself, or those
    that were not rejected); ``rejected``, None or (request, why) of the
    requests whose inputs the stub cannot take (each fails alone);
    ``buf``, which keeps inline input bytes alive; ``task``, the asyncio
    task of an async execute(); ``returned``, execute() has returned (or
    failed); ``arena_inputs``, the inputs in backend arenas as (first
    address, end address, arena id, offset), so that an output made of
    their bytes can be sent by reference (location 2) instead of copied."""

    @property
    def open(self):
        """How many of its requests are not complete yet."""
        return self.open_count()

    cdef Py_ssize_t open_count(self):
        cdef Py_ssize_t n = 0
        cdef RequestCore req
        for req in self.requests:
            if not req._done:
                n += 1
        return n


cpdef Batch make_batch(batch_id, list wire, buf, peer, model_name):
    """The batch of a decoded EXECUTE body (``wire``: WireRequest, see
    _codec.pxd), its inline inputs zero-copy views of ``buf``, its arena
    inputs views of the backend's arenas (``peer``)."""
    cdef Batch batch = Batch.__new__(Batch)
    cdef list requests = []
    cdef list inputs
    cdef Py_ssize_t index = 0
    cdef object view = memoryview(buf)
    batch.id = batch_id
    batch.buf = buf
    cdef object problem
    cdef WireRequest q
    cdef WireTensor t
    for q in wire:
        inputs = []
        problem = None
        for t in q.inputs:
            if t.location == _LOC_INLINE:
                data = view[t.offset : t.offset + <Py_ssize_t>t.byte_size]
            else:
                try:
                    data = peer.view(t.arena_id, t.arena_offset, t.byte_size)
                except peer.Unmapped as e:
                    # Its arena could not be mapped here: this request
                    # fails alone, the stub serves on.
                    problem = (
                        f"tritonpy: model '{model_name}' request '{q.request_id}': input "
                        f"'{t.name}' of {t.byte_size} bytes: {e}"
                    )
                    inputs.append(_tensor(t.name, t.dtype, t.dims, memoryview(b"")))
                    continue
                if batch.arena_inputs is None:
                    batch.arena_inputs = []
                start = peer.address(t.arena_id) + t.arena_offset
                batch.arena_inputs.append(
                    (start, start + t.byte_size, t.arena_id, t.arena_offset)
                )
            if not _size_ok(t.dtype, t.dims, t.byte_size):
                # The backend checks this (execute_builder.cc): request
                # content is data, so a request that slips through fails
                # alone, not the stub.
                problem = (
                    f"tritonpy: model '{model_name}' request '{q.request_id}': input "
                    f"'{t.name}' has {WIRE_NAMES[t.dtype]} shape {list(t.dims)}, which "
                    f"needs {_size(t.dtype, t.dims)} bytes; the EXECUTE frame carries "
                    f"{t.byte_size}"
                )
            inputs.append(_tensor(t.name, t.dtype, t.dims, data))
        req = _request(
            model_name,
            q.request_id,
            0 if q.correlation_id is None else q.correlation_id,
            q.flags,
            q.timeout_us,
            q.parameters,
            q.requested_output_names,
            inputs,
            batch,
            index,
            q.trace_context,
        )
        requests.append(req)
        if problem is not None:
            if batch.rejected is None:
                batch.rejected = []
            batch.rejected.append((req, problem))
        index += 1
    batch.requests = batch.given = requests
    return batch


cdef inline bint _size_ok(int dtype, tuple dims, uint64_t nbytes) except -1:
    cdef Py_ssize_t size
    if dtype == _TYPE_BYTES:
        return True
    size = dtype_wire_size(dtype, dims)
    return size >= 0 and nbytes == <uint64_t>size


cdef TensorCore _tensor(str name, int dtype, tuple dims, view):
    """A Tensor over wire bytes (``view``). The frame decoder has already
    checked the name, the data type code (1 to 14) and the dimensions
    (>= 0); make_batch, the byte size."""
    cdef TensorCore t
    t = TensorCore.__new__(_tensor_cls)
    t._name = name
    t._dtype = dtype
    t._dims = dims
    t._buf = view
    return t


cdef object _size(int dtype, tuple dims):
    size = _itemsize[dtype]
    for d in dims:
        size = size * d
    return size


cdef RequestCore _request(model_name, request_id, correlation_id, flags, timeout,
                          parameters, requested_output_names, inputs, batch,
                          Py_ssize_t index, str trace_context):
    cdef RequestCore r = RequestCore.__new__(_request_cls)
    r._model_name = model_name
    r._request_id = request_id
    r._correlation_id = correlation_id
    r._flags = flags
    r._timeout = timeout
    r._parameters = parameters or "{}"
    r._requested_output_names = requested_output_names
    r._inputs = inputs
    r._preferred_memory = _default_memory
    # The trace context; InferenceRequest.trace() makes the InferenceTrace
    # when a model asks for it.
    r._trace = trace_context
    r._batch = batch
    r._index = index
    return r


def request_from_stub(model_name, request_id, correlation_id, flags, timeout,
                      parameters, requested_output_names, inputs, batch=None,
                      Py_ssize_t index=0, str trace_context=""):
    """A request as execute() sees it, ``index``-th of ``batch`` (no
    validation: the frame decoder has checked the fields)."""
    return _request(model_name, request_id, correlation_id, flags, timeout,
                    parameters, requested_output_names, inputs, batch, index,
                    trace_context)


# ------------------------------------------------------------------ answers


cpdef str check_result(result, Py_ssize_t n, Batch batch):
    """What is wrong with a default-mode execute()'s result for ``batch``
    of ``n`` requests given to execute(), or "". ``None`` (or a None
    element) leaves a request to its response sender. The texts are the
    official backend's."""
    cdef Py_ssize_t i
    cdef RequestCore req
    if batch is None:
        raise TypeError("check_result() needs the batch")
    cdef list given = batch.given
    if result is None:
        return ""
    if not isinstance(result, (list, tuple)):
        return f"Expected a list in the execute return, found type '{type(result)}'."
    if len(result) != n:
        return (
            "Number of InferenceResponse objects do not match the number of "
            f"InferenceRequest objects. InferenceRequest(s) size is:{n}, and "
            f"InferenceResponse(s) size is:{len(result)}"
        )
    for i in range(n):
        r = result[i]
        if r is None:
            continue
        req = given[i]
        if req._release_flags & _RESCHEDULE:
            return (
                "Expected a None object in the execute function return list for "
                f"reschduled request, found type '{type(r)}'."
            )
        if not isinstance(r, _response_cls):
            return (
                "Expected an 'InferenceResponse' object in the execute function return "
                f"list, found type '{type(r)}'."
            )
        if req._sent or req._done:
            return SEND_SECOND_RESPONSE
    return ""


cpdef object answer(Batch batch, result, writer, own, model_name, str instance=""):
    """The entries of a default-mode batch whose execute() returned
    ``result`` (checked by check_result): written into ``writer`` (an open
    RESPONSES frame; returns how many), or with ``writer`` None returned as
    a list whose last entry ends the batch (BATCH_END). Requests already
    complete (answered through their senders) get no entry; so do requests
    left to their senders (a None answer, the sender taken); a None answer
    for a request whose sender nobody took is an error for it, since
    nothing can answer it any more (the error names ``instance``). Outputs go by reference where they
    can: the backend copies them before it ends the batch, and execute()
    has returned, so nothing changes them."""
    if batch is None:
        raise TypeError("answer() needs the batch")
    cdef list requests = batch.given
    cdef Py_ssize_t n = len(requests)
    cdef Py_ssize_t i
    cdef Py_ssize_t completed = 0
    cdef unsigned int flags
    cdef RequestCore req
    cdef FrameWriter w = writer
    cdef list entries = [] if writer is None else None
    for i in range(n):
        req = requests[i]
        if req._done:
            continue
        resp = None if result is None else result[i]
        flags = _RESP_FINAL
        if req._release_flags & _RESCHEDULE:
            flags = _RESP_RESCHEDULE | _RESP_NO_RESPONSE
        elif resp is None:
            if req._sender is not None:
                continue  # the model answers later, through the sender
            resp = _response_cls(error=TritonError(_unanswered(instance, req)))
        if writer is None:
            entries.append(_entry(req, resp, flags, 0, True, own, model_name))
        else:
            w.entry(_entry(req, resp, flags, w.pos, True, own, model_name))
        close_request(req)
        completed += 1
    if writer is not None:
        return completed
    if entries:
        (<Entry>entries[-1]).flags |= _RESP_BATCH_END
    return entries


cdef str _unanswered(str instance, RequestCore req):
    """The error of a default-mode request that execute() returned no
    response for and whose response sender it never took."""
    return execute_failed(
        instance,
        f"tritonpy: execute() returned no response for request '{req._request_id}' and "
        "did not take its response sender (request.get_response_sender()): nothing "
        "can answer it",
    )


cpdef Entry entry(RequestCore req, resp, unsigned int flags, Py_ssize_t frame_size, own,
                  model_name):
    """The entry of one response sent through a sender (or of an error
    made by the engine): outputs copied at once, so the model may reuse
    its arrays (all but pb_utils.Tensor.empty arrays, sent by reference)."""
    if req is None:
        raise TypeError("entry() needs the request")
    return _entry(req, resp, flags, frame_size, False, own, model_name)


cdef Entry _entry(RequestCore req, resp, unsigned int flags, Py_ssize_t frame_size,
                  bint by_ref, own, model_name):
    """An entry ready to write: outputs already copied (inline bytes or an
    arena allocation), or inside a block of our arenas the model wrote in
    place (held until released). A bad output turns the entry into an
    error for this request alone. With ``by_ref``, a large output lying
    inside an input of the request's batch in a backend arena is sent as a
    reference to it (location 2)."""
    cdef Batch batch = req._batch
    cdef ResponseCore r
    if batch is None:
        raise ValueError(f"request '{req._request_id}' is not part of a batch of this stub")
    if resp is None or flags & _RESP_NO_RESPONSE:
        return make_entry(batch.id, req._index, flags | _RESP_NO_RESPONSE, None, "", ())
    r = resp
    if r._error is not None:
        err = r._error
        return make_entry(batch.id, req._index, flags, (int(err.code()), _text(err.message())),
                          "", ())
    try:
        outputs = _outputs(req, r, frame_size, batch.arena_inputs if by_ref else None, own)
    except Exception as e:  # noqa: BLE001
        msg = f"model '{model_name}', request '{req._request_id}': {e}"
        return make_entry(batch.id, req._index, flags, (_INVALID_ARG, _text(msg)), "", ())
    return make_entry(batch.id, req._index, flags, None, r._parameters, outputs)


# The longest error text of an entry, in UTF-8 bytes: an entry alone in a
# frame must fit the backend's stub-max-body-bytes (set_text_limit, at INIT).
cdef Py_ssize_t _text_limit = (64 << 20) - 4096


def set_text_limit(Py_ssize_t limit):
    global _text_limit
    _text_limit = limit


cdef object _text(object message):
    """``message`` cut (with the marker) where an entry could not carry it.
    A str of n characters takes at most 6n bytes (escaped surrogates)."""
    if type(message) is str and len(<str>message) * 6 > _text_limit:
        return C.clip(message, _text_limit)
    return message


cdef tuple _outputs(RequestCore req, ResponseCore resp, Py_ssize_t frame_size, inputs, own):
    cdef object wanted = req._requested_output_names
    cdef list out = []
    cdef list allocated = None  # made for the first output copied into an arena
    cdef Py_ssize_t budget = WIRE_MAX_FRAME - frame_size - _ENTRY_RESERVE
    cdef Py_ssize_t n
    cdef TensorCore t
    cdef object small
    try:
        for t in resp._output_tensors:
            if wanted and t._name not in wanted:
                continue
            small = _small_wire_bytes(t)
            if small is not None:
                n = len(small)
                if n + _TENSOR_RESERVE <= budget:
                    budget -= n + _TENSOR_RESERVE
                    # The shape the tensor was made with, as the official
                    # backend sends (its Tensor keeps the dims it was given).
                    out.append(out_inline(t._name, t._dtype, t._dims, small))
                    continue
            try:
                name, dtype, dims, data = wire_parts(t)
                mv = memoryview(data)
                if mv.format != "B" or mv.ndim != 1:
                    mv = mv.cast("B")
            except Exception as e:  # noqa: BLE001
                raise ValueError(f"output '{t._name}': {e}") from e
            n = mv.nbytes
            if n <= WIRE_INLINE_LIMIT and n + _TENSOR_RESERVE <= budget:
                budget -= n + _TENSOR_RESERVE
                out.append(out_inline(name, dtype, tuple(dims), bytes(mv)))
                continue
            budget -= _TENSOR_RESERVE
            ref = _find_input(inputs, mv) if inputs else None
            if ref is not None:
                out.append(
                    out_arena(name, dtype, tuple(dims), n, ref[0], ref[1], _LOC_RECEIVER_ARENA)
                )
                continue
            # Copied into our arenas, unless the model wrote it there
            # (pb_utils.Tensor.empty): then by reference too.
            aid, off = own.place(mv)
            if allocated is None:
                allocated = []
            allocated.append((aid, off))
            out.append(out_arena(name, dtype, tuple(dims), n, aid, off, _LOC_ARENA))
    except BaseException:
        for aid, off in allocated or ():
            own.free(aid, off)
        raise
    return tuple(out)


cdef object _small_wire_bytes(TensorCore t):
    """The wire bytes of a fixed-size tensor of at most INLINE_LIMIT bytes,
    in one copy: of its array, or of the wire bytes it came with and still
    has (a BLS output or an input passed on, not read as an array); None
    for any other tensor (which goes through ``_to_wire``)."""
    cdef Py_ssize_t size
    cdef Py_buffer view
    arr = t._array
    if t._dtype == _TYPE_BYTES:
        return None
    if arr is None:
        if t._buf is None:
            return None
        try:
            PyObject_GetBuffer(t._buf, &view, PyBUF_SIMPLE)
        except BufferError:  # not contiguous: _to_wire's path says why
            return None
        try:
            if view.len > WIRE_INLINE_LIMIT:
                return None
            return PyBytes_FromStringAndSize(<const char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
    if t._buf is not None:
        return None
    # The array's byte size, from the dtype code and shape it was made with
    # (a reshape in place keeps the size), without asking the array.
    size = dtype_wire_size(t._dtype, t._dims)
    if size < 0 or size > WIRE_INLINE_LIMIT or arr.dtype.byteorder == ">":
        return None
    return arr.tobytes()


cdef object _find_input(list inputs, mv):
    """(arena id, offset) of ``mv``'s bytes if they lie inside one of
    ``inputs`` (see Batch.arena_inputs), else None."""
    if not mv.nbytes:
        return None
    addr = np.frombuffer(mv, np.uint8).ctypes.data
    end = addr + mv.nbytes
    for start, stop, aid, off in inputs:
        if start <= addr and end <= stop:
            return aid, off + (addr - start)
    return None


# ------------------------------------------------------------------ the outbox


cdef class Outbox:
    """Entries waiting for the next RESPONSES frames. Any thread puts (a
    response sender may be called from anywhere); the engine takes them
    all when it flushes, once per loop iteration. No lock: each method
    reads and writes its fields with no Python code run in between (list
    and tuple operations, C fields), so under the GIL each is atomic for
    every thread, as close_request is.

    Its fields (_batch.pxd): ``pending`` (the entries) and ``scheduled``
    (a flush is on its way)."""

    def __init__(self):
        self.pending = []

    def __len__(self):
        return len(self.pending)

    cdef bint has_pending(self):
        """A peek: an entry queued after it schedules a flush of its own."""
        return len(self.pending) != 0

    cdef bint _schedule(self):
        """After queueing: True when the caller must schedule a flush,
        i.e. none is on its way."""
        if self.scheduled:
            return False
        self.scheduled = True
        return True

    cpdef bint put(self, entries) except -1:
        """Queue ``entries`` (a list or tuple); True when the caller must
        schedule a flush."""
        if type(entries) is not list and type(entries) is not tuple:
            entries = list(entries)  # no Python code runs below
        self.pending.extend(entries)
        return self._schedule()

    cpdef list take(self):
        cdef list pending = self.pending
        self.pending = []
        self.scheduled = False
        return pending

    cpdef int send(self, RequestCore req, response, int flags, own, model_name) except -1:
        """A decoupled model's ``sender.send(response, flags)``, checked by
        the sender: the entry is made at once (outputs copied) and queued.
        Returns SENT_SCHEDULE (the caller must schedule a flush) and/or
        SENT_DONE (the request's batch is over)."""
        cdef unsigned int wire_flags = _RESP_FINAL if flags & 1 else 0
        cdef Batch batch = req._batch
        cdef bint done = False
        cdef bint schedule
        if response is None:
            wire_flags |= _RESP_NO_RESPONSE
        entry = _entry(req, response, wire_flags, 0, False, own, model_name)
        self.pending.append(entry)
        schedule = self._schedule()
        if flags & 1:
            done = batch.returned and batch.open_count() == 0
        return (SENT_SCHEDULE if schedule else 0) | (SENT_DONE if done else 0)


cpdef Py_ssize_t write_entries(writer, list entries, Py_ssize_t start) except -1:
    """Write ``entries[start:]`` into ``writer``'s open RESPONSES frame, as
    many as fit (at least one); returns the index of the first left out."""
    cdef Py_ssize_t i = start
    cdef Py_ssize_t n = len(entries)
    cdef FrameWriter w = writer
    cdef Entry entry
    if w is None:
        raise TypeError("write_entries() needs a writer")
    cdef Py_ssize_t size = w.pos
    while i < n:
        entry = entries[i]
        if i > start and size + entry_size(entry) > WIRE_MAX_FRAME:
            break
        w.entry(entry)
        size = w.pos
        i += 1
    return i
