# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Frame codec of the stub: docs/protocol.md in Cython.

Decoding never reads outside the message: every length, count and offset is
checked against the end of the frame before it is used. Arena offsets are
checked by the caller, who knows the arena sizes.
"""

import json
import sys

cimport cython

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("tritonpy's frame codec assumes a little-endian host")

MAGIC = 0x31595054
VERSION = 1
HEADER_SIZE = 24
MAX_FRAME = 131072
MAX_NDIM = 64
INLINE_LIMIT = 65536

FLAG_BODY_IN_ARENA = 1
FLAG_BATCH_DONE = 2

HELLO = 1
INIT = 2
INIT_DONE = 3
ARENA = 4
EXECUTE = 5
RESPONSES = 6
EXECUTE_DONE = 7
LOG = 8
FINALIZE = 9
FINALIZE_DONE = 10
ERROR = 11
RELEASE = 12
CANCEL = 13
SEND_ERROR = 14
IS_READY = 15
READY = 16
DRAIN = 17
BLS_REQUEST = 18
BLS_RESPONSE = 19
BLS_CANCEL = 20
BLS_ARENA = 21
BLS_RELEASE = 22
MODEL_CONTROL = 23
MODEL_CONTROL_DONE = 24
METRIC = 25
METRIC_DONE = 26
AUTO_COMPLETE = 27
AUTO_COMPLETE_DONE = 28
LOG_LEVELS = 29
LOG_LEVELS_ALL = 0xF  # bit n: TRITONSERVER_LogLevel n is enabled

# METRIC operations (docs/protocol.md, "Custom metrics").
OP_FAMILY_NEW = 1
OP_FAMILY_DELETE = 2
OP_METRIC_NEW = 3
OP_METRIC_DELETE = 4
OP_INCREMENT = 5
OP_SET = 6
OP_OBSERVE = 7
OP_VALUE = 8

RESP_FINAL = 1
RESP_RESCHEDULE = 0x40000000
RESP_NO_RESPONSE = 0x80000000
RESP_BATCH_END = 0x20000000

LOC_INLINE = 0
LOC_ARENA = 1
LOC_RECEIVER_ARENA = 2  # RESPONSES outputs only: the backend's own arena

cdef uint32_t _MAGIC = 0x31595054
cdef Py_ssize_t _HDR = 24
cdef Py_ssize_t _MAX_FRAME = 131072
cdef int _LAST_TYPE = LOG_LEVELS
cdef int _EXECUTE_TYPE = EXECUTE  # as a C int: compared without a Python lookup
cdef uint32_t _RESP_FLAGS = 0xE0000001u
cdef set _JSON_TYPES = {HELLO, INIT, INIT_DONE, FINALIZE_DONE, MODEL_CONTROL,
                        MODEL_CONTROL_DONE, AUTO_COMPLETE, AUTO_COMPLETE_DONE}


class ProtocolError(ValueError):
    """A frame that does not follow docs/protocol.md."""


# ------------------------------------------------------------------ reading


cdef class _Reader:
    cdef const uint8_t* p
    cdef Py_ssize_t pos
    cdef Py_ssize_t end

    cdef int need(self, Py_ssize_t n) except -1:
        if n < 0 or n > self.end - self.pos:
            raise ProtocolError(
                f"truncated frame: {n} bytes needed at offset {self.pos}, "
                f"the frame ends at {self.end}")
        return 0

    cdef uint8_t u8(self) except? 0xFF:
        self.need(1)
        cdef uint8_t v = self.p[self.pos]
        self.pos += 1
        return v

    cdef uint32_t u32(self) except? 0xFFFFFFFF:
        cdef uint32_t v
        self.need(4)
        memcpy(&v, self.p + self.pos, 4)
        self.pos += 4
        return v

    cdef uint64_t u64(self) except? 0xFFFFFFFFFFFFFFFF:
        cdef uint64_t v
        self.need(8)
        memcpy(&v, self.p + self.pos, 8)
        self.pos += 8
        return v

    cdef int64_t i64(self) except? -1:
        cdef int64_t v
        self.need(8)
        memcpy(&v, self.p + self.pos, 8)
        self.pos += 8
        return v

    cdef double f64(self) except? -1.0:
        cdef double v
        self.need(8)
        memcpy(&v, self.p + self.pos, 8)
        self.pos += 8
        return v

    cdef list f64s(self):
        cdef uint32_t n = self.u32()
        self.need(<Py_ssize_t>n * 8)
        cdef list out = []
        cdef uint32_t i
        for i in range(n):
            out.append(self.f64())
        return out

    cdef tuple metric_op(self):
        cdef uint8_t op = self.u8()
        cdef uint32_t h, k, n, i
        if op == OP_FAMILY_NEW:
            h = self.u32()
            k = self.u32()
            if k > 2:
                raise ProtocolError(f"unknown metric kind {k}")
            name = self.string()
            return (op, h, k, name, self.string())
        if op == OP_FAMILY_DELETE or op == OP_METRIC_DELETE or op == OP_VALUE:
            return (op, self.u32())
        if op == OP_METRIC_NEW:
            h = self.u32()
            k = self.u32()
            n = self.u32()
            self.need(<Py_ssize_t>n * 8)
            labels = []
            for i in range(n):
                key = self.string()
                labels.append((key, self.string()))
            return (op, h, k, labels, self.f64s())
        if op == OP_INCREMENT or op == OP_SET:
            h = self.u32()
            return (op, h, self.f64())
        if op == OP_OBSERVE:
            h = self.u32()
            return (op, h, self.f64s())
        raise ProtocolError(f"unknown metric op {op}")

    cdef str string(self):
        cdef uint32_t n = self.u32()
        self.need(n)
        cdef str s = PyUnicode_DecodeUTF8(<const char*>(self.p + self.pos), n, "strict")
        self.pos += n
        return s

    cdef int zero32(self) except -1:
        if self.u32() != 0:
            raise ProtocolError("a reserved field is not zero")
        return 0

    cdef int pad8(self) except -1:
        cdef Py_ssize_t n = (8 - self.pos % 8) % 8
        self.need(n)
        cdef Py_ssize_t i
        for i in range(n):
            if self.p[self.pos + i] != 0:
                raise ProtocolError("padding is not zero")
        self.pos += n
        return 0

    cdef tuple tensor(self, bint receiver_arena_ok=False):
        """(name, dtype, dims, byte_size, location, a, b): for inline data
        a is the offset of the data in the frame and b is 0; for arena data
        a is the arena id and b the offset in that arena."""
        cdef str name = self.string()
        cdef uint32_t dtype = self.u32()
        if dtype < 1 or dtype > 14:
            raise ProtocolError(f"tensor '{name}': unknown data type {dtype}")
        cdef uint32_t ndim = self.u32()
        if ndim > MAX_NDIM:
            raise ProtocolError(f"tensor '{name}': {ndim} dimensions, at most {MAX_NDIM}")
        cdef list dims = []
        cdef int64_t d
        cdef uint32_t i
        for i in range(ndim):
            d = self.i64()
            if d < 0:
                raise ProtocolError(f"tensor '{name}': negative dimension {d}")
            dims.append(d)
        cdef uint64_t byte_size = self.u64()
        cdef uint8_t loc = self.u8()
        cdef uint64_t a, b
        if loc == LOC_INLINE:
            self.pad8()
            if byte_size > <uint64_t>(self.end - self.pos):
                raise ProtocolError(f"tensor '{name}': {byte_size} inline bytes past the frame end")
            a = self.pos
            b = 0
            self.pos += <Py_ssize_t>byte_size
        elif loc == LOC_ARENA or (receiver_arena_ok and loc == LOC_RECEIVER_ARENA):
            a = self.u32()
            self.zero32()
            b = self.u64()
        else:
            raise ProtocolError(f"tensor '{name}': unknown location {loc}")
        return (name, dtype, tuple(dims), byte_size, loc, a, b)

    cdef tuple request(self):
        """One request entry of EXECUTE / BLS_REQUEST."""
        cdef uint32_t j, k
        rid = self.string()
        cdef uint8_t kind = self.u8()
        cu = self.u64()
        cs = self.string()
        if kind == 0:
            corr = None
        elif kind == 1:
            corr = cu
        elif kind == 2:
            corr = cs
        else:
            raise ProtocolError(f"request '{rid}': unknown correlation kind {kind}")
        flags = self.u32()
        timeout = self.u64()
        params = self.string()
        k = self.u32()
        cdef list names = []
        for j in range(k):
            names.append(self.string())
        k = self.u32()
        cdef list tensors = []
        for j in range(k):
            tensors.append(self.tensor())
        return (rid, corr, flags, timeout, params, names, tensors, self.string())

    cdef tuple response_rest(self, bint receiver_arena_ok):
        """What follows the flags of a RESPONSES entry and of a BLS_RESPONSE:
        (error or None, parameters, output tensors)."""
        cdef uint8_t has_error = self.u8()
        cdef uint32_t code = self.u32()
        cdef str msg = self.string()
        cdef str params = self.string()
        cdef uint32_t k = self.u32()
        cdef uint32_t j
        cdef list tensors = []
        for j in range(k):
            tensors.append(self.tensor(receiver_arena_ok))
        return ((code, msg) if has_error else None, params, tensors)

    cdef int done(self) except -1:
        if self.pos != self.end:
            raise ProtocolError(f"{self.end - self.pos} trailing bytes after the body")
        return 0


# Entry points take any contiguous buffer (bytes, bytearray, memoryview,
# mmap) through the buffer protocol directly: a typed memoryview argument
# costs more to set up than decoding a small frame.


def decode_header(buf):
    """Check the header of a whole message; return (type, flags, id, body_len)."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        return _decode_header(<const uint8_t*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


cdef tuple _decode_header(const uint8_t* p, Py_ssize_t n):
    if n < _HDR:
        raise ProtocolError(f"a {n}-byte message is shorter than the frame header")
    if n > _MAX_FRAME:
        raise ProtocolError(f"a {n}-byte message is longer than MAX_FRAME")
    cdef uint32_t magic, body_len, reserved
    cdef uint16_t flags
    cdef uint64_t fid
    memcpy(&magic, p, 4)
    memcpy(&flags, p + 6, 2)
    memcpy(&fid, p + 8, 8)
    memcpy(&body_len, p + 16, 4)
    memcpy(&reserved, p + 20, 4)
    if magic != _MAGIC:
        raise ProtocolError(f"bad magic {magic:#x}")
    if p[4] != VERSION:
        raise ProtocolError(f"protocol version {p[4]}, this stub speaks {VERSION}")
    cdef int ftype = p[5]
    if ftype < 1 or ftype > _LAST_TYPE:
        raise ProtocolError(f"unknown frame type {ftype}")
    cdef uint16_t allowed = FLAG_BODY_IN_ARENA
    if ftype == RESPONSES:
        allowed |= FLAG_BATCH_DONE
    if flags & ~allowed:
        raise ProtocolError(f"unknown flags {flags:#x} on frame type {ftype}")
    if reserved != 0:
        raise ProtocolError("the header's reserved field is not zero")
    if flags & FLAG_BODY_IN_ARENA:
        if n != _HDR + 16:
            raise ProtocolError("a BODY_IN_ARENA frame must carry exactly an arena reference")
    elif body_len != n - _HDR:
        raise ProtocolError(f"body_len {body_len} does not match the {n - _HDR} bytes received")
    return ftype, flags, fid, body_len


def decode_arena_ref(buf):
    """The (arena_id, offset) of a BODY_IN_ARENA frame whose header is valid."""
    cdef Py_buffer view
    cdef _Reader r = _Reader()
    cdef uint32_t aid
    cdef uint64_t off
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        r.p = <const uint8_t*>view.buf
        r.pos = _HDR
        r.end = view.len
        aid = r.u32()
        r.zero32()
        off = r.u64()
        r.done()
    finally:
        PyBuffer_Release(&view)
    return aid, off


def decode_body(int ftype, buf, Py_ssize_t start=24):
    """Decode the body of a frame of type ``ftype`` that occupies
    ``buf[start:]``. Offsets of inline tensor data in the result are
    offsets into ``buf``.

    EXECUTE -> list of requests
        (request_id, correlation, flags, timeout_us, parameters,
         requested_output_names, inputs, trace_context)
        where correlation is None, an int or a str, and inputs are tensor
        tuples (see _Reader.tensor).
    RESPONSES -> list of
        (batch_id, request_index, response_flags, error, parameters, outputs)
        where error is None or (code, message).
    JSON frames -> the dict; ARENA -> (arena_id, size);
    EXECUTE_DONE -> (ok, error); LOG -> (level, file, line, message);
    ERROR -> message; RELEASE -> list of (arena_id, offset);
    CANCEL -> list of (batch_id, request_index);
    SEND_ERROR -> (batch_id, request_index, code, message);
    READY -> (ready, message); FINALIZE, IS_READY, DRAIN, BLS_CANCEL -> None;
    BLS_REQUEST -> (model_name, model_version, trace_batch_id,
        trace_request_index, request as in EXECUTE);
    BLS_RESPONSE -> (response_flags, error, parameters, outputs);
    BLS_ARENA -> (arena_id, size); BLS_RELEASE -> list of (arena_id, offset);
    METRIC -> list of ops: (FAMILY_NEW, family, kind, name, description),
        (FAMILY_DELETE, family), (METRIC_NEW, metric, family,
        [(key, value), ...], [bucket, ...]), (METRIC_DELETE, metric),
        (INCREMENT or SET, metric, value), (OBSERVE, metric, [value, ...]),
        (VALUE, metric);
    METRIC_DONE -> (ok, error, value); LOG_LEVELS -> enabled (bit mask).
    """
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        return _decode_body(ftype, <const uint8_t*>view.buf, view.len, start)
    finally:
        PyBuffer_Release(&view)


cdef object _decode_body(int ftype, const uint8_t* p, Py_ssize_t n, Py_ssize_t start):
    if start < 0 or start > n:
        raise ProtocolError("body start outside the buffer")
    cdef _Reader r = _Reader()
    r.p = p
    r.pos = start
    r.end = n
    cdef object out
    cdef uint32_t count, i, j, k
    cdef list items, names, tensors
    cdef uint8_t kind, has_error
    cdef uint32_t aid
    if ftype == _EXECUTE_TYPE:  # the frame of every batch: no Python compares first
        count = r.u32()
        items = []
        for i in range(count):
            items.append(r.request())
        r.done()
        return items
    if ftype in _JSON_TYPES:
        try:
            out = json.loads(PyUnicode_DecodeUTF8(<const char*>(r.p + r.pos), r.end - r.pos, "strict"))
        except ValueError as e:
            raise ProtocolError(f"frame type {ftype}: body is not JSON: {e}") from None
        if not isinstance(out, dict):
            raise ProtocolError(f"frame type {ftype}: JSON body is not an object")
        return out
    cdef uint64_t bid
    if ftype == FINALIZE or ftype == IS_READY or ftype == DRAIN or ftype == BLS_CANCEL:
        out = None
    elif ftype == BLS_RESPONSE:
        rflags = r.u32()
        if rflags & ~(<uint32_t>RESP_FINAL):
            raise ProtocolError(f"unknown BLS response flags {rflags:#x}")
        err, params, tensors = r.response_rest(False)
        out = (rflags, err, params, tensors)
    elif ftype == METRIC_DONE:
        ok = r.u8()
        err_text = r.string()
        out = (ok, err_text, r.f64())
    elif ftype == METRIC:
        count = r.u32()
        r.need(<Py_ssize_t>count * 5)
        items = []
        for i in range(count):
            items.append(r.metric_op())
        out = items
    elif ftype == BLS_REQUEST:
        mname = r.string()
        mver = r.i64()
        bid = r.u64()
        idx = r.u32()
        out = (mname, mver, bid, idx, r.request())
    elif ftype == CANCEL:
        count = r.u32()
        items = []
        for i in range(count):
            bid = r.u64()
            idx = r.u32()
            r.zero32()
            items.append((bid, idx))
        out = items
    elif ftype == SEND_ERROR:
        bid = r.u64()
        idx = r.u32()
        code = r.u32()
        out = (bid, idx, code, r.string())
    elif ftype == READY:
        ok = r.u8()
        out = (ok, r.string())
    elif ftype == ARENA or ftype == BLS_ARENA:
        aid = r.u32()
        r.zero32()
        out = (aid, r.u64())
    elif ftype == RESPONSES:
        count = r.u32()
        items = []
        for i in range(count):
            bid = r.u64()
            idx = r.u32()
            rflags = r.u32()
            if rflags & ~_RESP_FLAGS:
                raise ProtocolError(f"response {i}: unknown response flags {rflags:#x}")
            err, params, tensors = r.response_rest(True)
            items.append((bid, idx, rflags, err, params, tensors))
        out = items
    elif ftype == EXECUTE_DONE:
        ok = r.u8()
        out = (ok, r.string())
    elif ftype == LOG_LEVELS:
        out = r.u32()
        if out & ~LOG_LEVELS_ALL:
            raise ProtocolError(f"unknown log level bits {out:#x}")
    elif ftype == LOG:
        level = r.u32()
        f = r.string()
        line = r.u32()
        out = (level, f, line, r.string())
    elif ftype == ERROR:
        out = r.string()
    elif ftype == RELEASE or ftype == BLS_RELEASE:
        count = r.u32()
        items = []
        for i in range(count):
            aid = r.u32()
            r.zero32()
            items.append((aid, r.u64()))
        out = items
    else:
        raise ProtocolError(f"unknown frame type {ftype}")
    r.done()
    return out


# ------------------------------------------------------------------ records


@cython.freelist(16)
cdef class OutTensor:
    pass  # fields: _codec.pxd


@cython.freelist(16)
cdef class Entry:
    pass  # fields: _codec.pxd


cdef inline OutTensor _out_tensor(str name, uint32_t dtype, tuple dims, uint64_t byte_size):
    cdef OutTensor t = OutTensor.__new__(OutTensor)
    t.name = name
    t.dtype = dtype
    t.dims = dims
    t.byte_size = byte_size
    return t


cdef OutTensor out_inline(str name, uint32_t dtype, tuple dims, bytes data):
    cdef OutTensor t = _out_tensor(name, dtype, dims, PyBytes_GET_SIZE(data))
    t.data = data
    t.location = 0  # LOC_INLINE
    return t


cdef OutTensor out_arena(str name, uint32_t dtype, tuple dims, uint64_t byte_size,
                         uint32_t arena_id, uint64_t offset, uint8_t location):
    cdef OutTensor t = _out_tensor(name, dtype, dims, byte_size)
    t.arena_id = arena_id
    t.offset = offset
    t.location = location
    return t


cdef Entry make_entry(uint64_t batch_id, uint32_t index, uint32_t flags, object error,
                      str parameters, tuple outputs):
    cdef Entry e = Entry.__new__(Entry)
    e.batch_id = batch_id
    e.index = index
    e.flags = flags
    e.error = error
    e.parameters = parameters
    e.outputs = outputs
    return e


cdef inline Py_ssize_t _utf8_size(str s) except -1:
    cdef Py_ssize_t n
    PyUnicode_AsUTF8AndSize(s, &n)  # cached in the str, as string() uses it
    return n


cdef Py_ssize_t entry_size(Entry e) except -1:
    """The most bytes FrameWriter.entry writes for ``e`` (exact but for
    the up to 7 padding bytes before inline data)."""
    # batch id, index, flags, has_error, code, message and parameters
    # lengths, output count
    cdef Py_ssize_t size = 8 + 4 + 4 + 1 + 4 + 4 + 4 + 4
    cdef OutTensor o
    if e.error is not None:
        msg = e.error[1]
        return size + (_utf8_size(msg) if type(msg) is str else len(msg))
    size += _utf8_size(e.parameters)
    for o in e.outputs:
        # name, dtype, ndim, dims, byte size, location
        size += 4 + _utf8_size(o.name) + 4 + 4 + 8 * len(o.dims) + 8 + 1
        if o.data is not None:
            size += 7 + <Py_ssize_t>o.byte_size  # padding to 8, the bytes
        else:
            size += 4 + 4 + 8  # arena id, reserved, offset
    return size


# ------------------------------------------------------------------ writing


@cython.final
cdef class FrameWriter:
    """Builds one frame at a time in a reusable buffer.

    Usage: ``begin(type, id, flags)``, body writes, then ``finish()`` which
    fills in the header and returns the frame as bytes."""

    cdef uint8_t* buf
    cdef Py_ssize_t cap
    cdef Py_ssize_t pos
    cdef bint open

    def __cinit__(self):
        self.cap = 4096
        self.buf = <uint8_t*>realloc(NULL, self.cap)
        if self.buf == NULL:
            raise MemoryError()
        self.pos = 0
        self.open = False

    def __dealloc__(self):
        free(self.buf)

    cdef int reserve(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t want = self.pos + n
        cdef Py_ssize_t cap = self.cap
        cdef uint8_t* nb
        if want <= cap:
            return 0
        while cap < want:
            cap *= 2
        nb = <uint8_t*>realloc(self.buf, cap)
        if nb == NULL:
            raise MemoryError()
        self.buf = nb
        self.cap = cap
        return 0

    cdef inline int put(self, const void* src, Py_ssize_t n) except -1:
        self.reserve(n)
        memcpy(self.buf + self.pos, src, n)
        self.pos += n
        return 0

    cpdef begin(self, int ftype, uint64_t fid=0, uint16_t flags=0):
        self.pos = 0
        self.reserve(_HDR)
        memset(self.buf, 0, _HDR)
        memcpy(self.buf, &_MAGIC, 4)
        self.buf[4] = VERSION
        self.buf[5] = <uint8_t>ftype
        memcpy(self.buf + 6, &flags, 2)
        memcpy(self.buf + 8, &fid, 8)
        self.pos = _HDR
        self.open = True

    cpdef set_flags(self, uint16_t flags):
        memcpy(self.buf + 6, &flags, 2)

    cpdef Py_ssize_t size(self):
        return self.pos

    cpdef patch_u32(self, Py_ssize_t at, uint32_t v):
        """Overwrite 4 bytes already written (e.g. a count known only later)."""
        if at < _HDR or at + 4 > self.pos:
            raise IndexError(f"patch_u32 at {at} outside the body written so far")
        memcpy(self.buf + at, &v, 4)

    cpdef u8(self, uint8_t v):
        self.put(&v, 1)

    cpdef u32(self, uint32_t v):
        self.put(&v, 4)

    cpdef u64(self, uint64_t v):
        self.put(&v, 8)

    cpdef f64(self, double v):
        self.put(&v, 8)

    cpdef i64(self, int64_t v):
        self.put(&v, 8)

    cpdef string(self, s):
        cdef Py_ssize_t size
        cdef const char* text
        cdef bytes raw
        if type(s) is str:
            text = PyUnicode_AsUTF8AndSize(s, &size)  # cached in the str
            self.len_prefixed(text, size)
        else:
            raw = s.encode() if isinstance(s, str) else bytes(s)
            self.len_prefixed(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))

    cdef int len_prefixed(self, const char* p, Py_ssize_t size) except -1:
        cdef uint32_t n = <uint32_t>size
        if size > 0xFFFFFFFF:
            raise OverflowError("a string longer than 4 GiB")
        self.put(&n, 4)
        if size:
            self.put(p, size)
        return 0

    cpdef raw(self, data):
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            self.put(view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    cpdef pad8(self):
        cdef Py_ssize_t n = (8 - self.pos % 8) % 8
        self.reserve(n)
        memset(self.buf + self.pos, 0, n)
        self.pos += n

    cpdef tensor_head(self, str name, uint32_t dtype, tuple dims, uint64_t byte_size):
        self.string(name)
        self.u32(dtype)
        self.u32(len(dims))
        for d in dims:
            self.i64(d)
        self.u64(byte_size)

    cpdef tensor_inline(self, str name, uint32_t dtype, tuple dims, data):
        cdef Py_buffer view
        if type(data) is bytes:  # what the stub's entries carry: no buffer set-up
            self._inline(name, dtype, dims, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
            return
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            self._inline(name, dtype, dims, view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    cdef int _inline(self, str name, uint32_t dtype, tuple dims,
                     const void* p, Py_ssize_t n) except -1:
        self.tensor_head(name, dtype, dims, n)
        self.u8(LOC_INLINE)
        self.pad8()
        self.put(p, n)
        return 0

    cpdef entry(self, Entry e):
        """One RESPONSES entry (Entry, _codec.pxd), in the room entry_size
        reserves for it."""
        cdef object err = e.error
        cdef OutTensor o
        self.reserve(entry_size(e))
        self.u64(e.batch_id)
        self.u32(e.index)
        self.u32(e.flags)
        if err is not None:
            self.u8(1)
            self.u32(err[0])
            self.string(err[1])
            self.len_prefixed(NULL, 0)  # parameters
            self.u32(0)  # outputs
            return
        self.u8(0)
        self.u32(0)
        self.len_prefixed(NULL, 0)  # message
        self.string(e.parameters)
        self.u32(len(e.outputs))
        for o in e.outputs:
            if o.data is not None:
                self._inline(o.name, o.dtype, o.dims, PyBytes_AS_STRING(o.data), o.byte_size)
            else:
                self.tensor_arena(o.name, o.dtype, o.dims, o.byte_size, o.arena_id, o.offset,
                                  o.location)

    cpdef tensor_arena(self, str name, uint32_t dtype, tuple dims, uint64_t byte_size,
                       uint32_t arena_id, uint64_t offset, uint8_t location=LOC_ARENA):
        """An arena tensor: location 1 (the sender's arena) or 2 (the
        receiver's: RESPONSES outputs that are inputs of their batch)."""
        self.tensor_head(name, dtype, dims, byte_size)
        self.u8(location)
        self.u32(arena_id)
        self.u32(0)
        self.u64(offset)

    cpdef json_body(self, dict obj):
        cdef bytes raw = json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()
        self.put(<const char*>raw, len(raw))

    cpdef bytes body_bytes(self):
        """The body written so far (to move it into an arena)."""
        return PyBytes_FromStringAndSize(<const char*>(self.buf + _HDR), self.pos - _HDR)

    cpdef bytes finish(self):
        cdef uint32_t body_len = <uint32_t>(self.pos - _HDR)
        memcpy(self.buf + 16, &body_len, 4)
        self.open = False
        return PyBytes_FromStringAndSize(<const char*>self.buf, self.pos)

    cpdef bytes finish_in_arena(self, uint32_t arena_id, uint64_t offset):
        """Replace the body by a reference to the copy the caller placed
        in its arena, and return the short frame."""
        cdef uint32_t body_len = <uint32_t>(self.pos - _HDR)
        cdef uint16_t flags
        memcpy(&flags, self.buf + 6, 2)
        flags |= FLAG_BODY_IN_ARENA
        memcpy(self.buf + 6, &flags, 2)
        memcpy(self.buf + 16, &body_len, 4)
        self.pos = _HDR
        self.u32(arena_id)
        self.u32(0)
        self.u64(offset)
        self.open = False
        return PyBytes_FromStringAndSize(<const char*>self.buf, self.pos)


def encode_json(int ftype, dict obj):
    cdef FrameWriter w = FrameWriter()
    w.begin(ftype)
    w.json_body(obj)
    return w.finish()


def encode_simple(int ftype, body, uint64_t fid=0):
    """Encode the small non-tensor frames from their decoded form
    (see decode_body)."""
    cdef FrameWriter w = FrameWriter()
    w.begin(ftype, fid)
    if ftype == ARENA or ftype == BLS_ARENA:
        w.u32(body[0])
        w.u32(0)
        w.u64(body[1])
    elif ftype == EXECUTE_DONE:
        w.u8(1 if body[0] else 0)
        w.string(body[1])
    elif ftype == LOG:
        w.u32(body[0])
        w.string(body[1])
        w.u32(body[2])
        w.string(body[3])
    elif ftype == ERROR:
        w.string(body)
    elif ftype == RELEASE or ftype == BLS_RELEASE:
        w.u32(len(body))
        for aid, off in body:
            w.u32(aid)
            w.u32(0)
            w.u64(off)
    elif ftype == READY:
        w.u8(1 if body[0] else 0)
        w.string(body[1])
    elif ftype == LOG_LEVELS:
        w.u32(body)
    elif ftype == FINALIZE or ftype == IS_READY or ftype == BLS_CANCEL:
        pass
    elif ftype in _JSON_TYPES:
        w.json_body(body)
    else:
        raise ValueError(f"encode_simple does not encode frame type {ftype}")
    return w.finish()
