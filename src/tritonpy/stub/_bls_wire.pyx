# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
"""A BLS call in the stub, compiled: its record (``Call``), the BLS_REQUEST
made from a model's ``pb_utils.InferenceRequest`` and the output tensors
of a BLS_RESPONSE. The client (bls.py) decides when frames are sent and
who waits; this module only keeps and converts, reading the request's and
tensors' C fields (pb_utils/_core.pxd).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from libc.stdint cimport uint32_t, uint64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from tritonpy.pb_utils._seam cimport RequestCore, TensorCore, dtype_wire_size, wire_parts
from tritonpy.stub._codec cimport FrameWriter, WireTensor
from tritonpy.stub._wire cimport WIRE_INLINE_LIMIT, WIRE_MAX_FRAME

import collections
import math

from tritonpy.pb_utils._seam import ITEMSIZE, TYPE_BYTES, WIRE_NAMES, Tensor, TritonModelException
from tritonpy.stub import _codec as C

cdef object _tensor_cls = Tensor
cdef object _deque = collections.deque


cdef class Call:
    """One BLS call or model-control call in flight (bls.py says who
    reads and writes what)."""

    cdef public object id
    cdef public object client
    cdef public bint decoupled
    cdef public object responses  # a deque of InferenceResponse
    cdef public bint final
    cdef public object future  # an asyncio future the loop waits on, or None
    # Only a thread other than the loop's waits on an event (made by the
    # first such wait): the loop thread reads the socket itself.
    cdef public object event
    cdef public double deadline  # time.monotonic() past which it fails; 0: none
    cdef public bint abandoned
    cdef public bint control
    cdef public object reply

    def __init__(self, client, call_id, bint decoupled):
        self.id = call_id
        self.client = client
        self.decoupled = decoupled
        self.responses = _deque()


def deadline(RequestCore request not None, double grace):
    """When a call of ``request`` fails for want of an answer, on
    ``time.monotonic()``'s clock (CLOCK_MONOTONIC): ``grace`` seconds past
    its timeout; 0.0 for a request without one."""
    cdef timespec now
    cdef double timeout_us = request._timeout
    if timeout_us <= 0:
        return 0.0
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec + now.tv_nsec * 1e-9 + timeout_us * 1e-6 + grace


cdef int _LOC_INLINE = C.LOC_INLINE
cdef int _TYPE_BYTES = TYPE_BYTES
cdef int _BLS_REQUEST = C.BLS_REQUEST
# Room kept in a frame for the fields around the inputs, and per input.
cdef Py_ssize_t _FIXED_RESERVE = 4096
cdef Py_ssize_t _TENSOR_RESERVE = 128


def request_frame(Py_ssize_t call_id, RequestCore request not None, own):
    """The BLS_REQUEST frame of ``request``. Inputs up to INLINE_LIMIT ride
    in the frame while it has room; larger ones are copied into the stub's
    arenas (``own``; the backend returns them with RELEASE once copied),
    unless the model wrote them there (pb_utils.Tensor.empty): those are
    sent by reference. Written straight from the request's fields (it runs
    per BLS call)."""
    cdef list taken = []
    cdef Py_ssize_t budget = WIRE_MAX_FRAME - _FIXED_RESERVE
    cdef Py_buffer view
    cdef TensorCore t
    cdef FrameWriter w
    corr = request._correlation_id
    if corr == 0 or corr == "":
        corr = None
    params = request._parameters
    if params == "{}":
        params = ""
    trace = request._trace
    if type(trace) is str:  # a request given to execute(): trace() makes it
        trace = request.trace()
    try:
        # (Fields out of their wire range, e.g. a negative correlation id, fail here.)
        w = _request_head(
            call_id, request._model_name, request._model_version, request._request_id, corr,
            request._flags, request._timeout, params, request._requested_output_names,
            trace._batch_id, trace._index, len(request._inputs))
        for t in request._inputs:
            name, dtype, dims, data = wire_parts(t)
            if type(dims) is not tuple:
                dims = tuple(dims)
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
            try:
                if view.len <= WIRE_INLINE_LIMIT and view.len + _TENSOR_RESERVE <= budget:
                    budget -= view.len + _TENSOR_RESERVE
                    w._inline(name, dtype, dims, view.buf, view.len)
                    continue
            finally:
                PyBuffer_Release(&view)
            mv = memoryview(data)
            if mv.ndim != 1 or mv.format != "B":
                mv = mv.cast("B")
            aid, off = own.place(mv)
            taken.append((aid, off))
            w.tensor_arena(name, dtype, dims, mv.nbytes, aid, off)
        return _request_end(w, own)
    except BaseException:
        for aid, off in taken:
            own.free(aid, off)
        raise


def encode_request(Py_ssize_t call_id, str model_name, long long model_version,
                   str request_id, correlation, unsigned int flags,
                   unsigned long long timeout_us, str parameters, requested,
                   list inputs, own=None, unsigned long long trace_batch_id=0,
                   unsigned int trace_request_index=0):
    """One BLS_REQUEST frame. ``inputs``: (name, dtype, dims, inline data or
    None, arena_id, offset, byte_size). A body too large for a frame goes
    into ``own`` (the stub's arenas). ``trace_batch_id`` (0: none) and
    ``trace_request_index`` name the request whose trace the call continues."""
    cdef FrameWriter w = _request_head(
        call_id, model_name, model_version, request_id, correlation, flags, timeout_us,
        parameters, requested, trace_batch_id, trace_request_index, len(inputs))
    for name, dtype, dims, data, aid, off, n in inputs:
        if data is not None:
            w.tensor_inline(name, dtype, dims, data)
        else:
            w.tensor_arena(name, dtype, dims, n, aid, off)
    return _request_end(w, own)


cdef FrameWriter _request_head(
        Py_ssize_t call_id, str model_name, long long model_version, str request_id,
        correlation, unsigned int flags, unsigned long long timeout_us, str parameters,
        requested, unsigned long long trace_batch_id, unsigned int trace_request_index,
        uint32_t input_count):
    """A BLS_REQUEST up to its inputs (docs/protocol.md), ``input_count``
    of them to follow."""
    cdef FrameWriter w = FrameWriter()
    w.begin(_BLS_REQUEST, call_id)
    w.string(model_name)
    w.i64(model_version)
    w.u64(trace_batch_id)
    w.u32(trace_request_index)
    if request_id:
        w.string(request_id)
    else:
        w.len_prefixed(NULL, 0)
    # (An empty text is its length alone: written without looking at a str.)
    if correlation is None:
        w.u8(0)
        w.u64(0)
        w.len_prefixed(NULL, 0)
    elif isinstance(correlation, str):
        w.u8(2)
        w.u64(0)
        w.string(correlation)
    else:
        w.u8(1)
        w.u64(correlation)
        w.len_prefixed(NULL, 0)
    w.u32(flags)
    w.u64(timeout_us)
    if parameters:
        w.string(parameters)
    else:
        w.len_prefixed(NULL, 0)
    w.u32(len(requested))
    for name in requested:
        w.string(name)
    w.u32(input_count)
    return w


cdef bytes _request_end(FrameWriter w, own):
    """The BLS_REQUEST after its inputs, as a frame; a body too large for
    one goes into ``own`` (the stub's arenas)."""
    w.len_prefixed(NULL, 0)  # trace_context: the backend takes the trace from trace_batch_id
    if w.size() > WIRE_MAX_FRAME:
        if own is None:
            raise ValueError("BLS_REQUEST too large for a frame")
        body = w.body_bytes()
        aid, off, view = own.alloc(len(body))
        try:
            view[:] = body
            return w.finish_in_arena(aid, off)
        except BaseException:
            own.free(aid, off)
            raise
    return w.finish()


def response_outputs(tuple outputs, buf, lease, release):
    """The output tensors (WireTensor, _codec.pxd) of a decoded
    BLS_RESPONSE: inline data copied out of the frame (whose buffer is
    reused) into a bytearray, arena data as a numpy view that holds the allocation
    (``lease(arena_id, offset, byte_size)``). When a tensor's bytes
    disagree with its shape, every arena output is handed to
    ``release((arena_id, offset))`` (none is leased yet) and
    TritonModelException names the tensor."""
    cdef list tensors = []
    cdef TensorCore t
    cdef WireTensor w, other
    cdef Py_ssize_t size
    for w in outputs:
        if w.dtype == _TYPE_BYTES:
            continue
        size = dtype_wire_size(w.dtype, w.dims)
        if size < 0 or w.byte_size != <uint64_t>size:
            for other in outputs:
                if other.location != _LOC_INLINE:
                    release((other.arena_id, other.arena_offset))
            raise TritonModelException(
                f"Tensor '{w.name}': {WIRE_NAMES[w.dtype]} shape {list(w.dims)} "
                f"needs {math.prod(w.dims) * ITEMSIZE[w.dtype]} bytes, got {w.byte_size}"
            )
    for w in outputs:
        if w.location == _LOC_INLINE:
            data = _copied(buf, w.offset, w.byte_size)
        else:
            data = memoryview(lease(w.arena_id, w.arena_offset, w.byte_size))
            if data.ndim != 1 or data.format != "B":
                data = data.cast("B")
        t = TensorCore.__new__(_tensor_cls)
        t._name = w.name
        t._dtype = w.dtype
        t._dims = w.dims
        t._buf = data
        tensors.append(t)
    return tensors


cdef bytearray _copied(buf, uint64_t start, uint64_t n):
    """A copy of ``n`` bytes of ``buf`` from ``start`` (a frame's inline
    data, which the decoder found inside it)."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if start > <uint64_t>view.len or n > <uint64_t>view.len - start:
            raise ValueError("BLS output outside its frame")
        return PyByteArray_FromStringAndSize(<const char*>view.buf + start, <Py_ssize_t>n)
    finally:
        PyBuffer_Release(&view)
