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
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8


cdef extern from "Python.h":
    # NULL with an exception set for a str that is not UTF-8 (a lone
    # surrogate): checked by hand, see _utf8.
    const char* _utf8_or_null "PyUnicode_AsUTF8AndSize" (object s, Py_ssize_t* size)
    void PyErr_Clear()
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset

# The limits and header offsets as C constants (docs/protocol.toml).
from tritonpy.stub._wire cimport (
    WIRE_ALLOCATION_SIZE,
    WIRE_ARENA_REF_SIZE,
    WIRE_F64_SIZE,
    WIRE_HEADER_BODY_LEN_OFFSET,
    WIRE_HEADER_FLAGS_OFFSET,
    WIRE_HEADER_ID_OFFSET,
    WIRE_HEADER_MAGIC_OFFSET,
    WIRE_HEADER_RESERVED_OFFSET,
    WIRE_HEADER_SIZE,
    WIRE_HEADER_TYPE_OFFSET,
    WIRE_HEADER_VERSION_OFFSET,
    WIRE_I64_SIZE,
    WIRE_LABEL_MIN_SIZE,
    WIRE_LENGTH_SIZE,
    WIRE_MAX_FRAME,
    WIRE_MAX_NDIM,
    WIRE_METRIC_MIN_SIZE,
    WIRE_METRIC_OP_FAMILY_NEW_MIN_SIZE,
    WIRE_METRIC_OP_INCREMENT_MIN_SIZE,
    WIRE_METRIC_OP_METRIC_NEW_MIN_SIZE,
    WIRE_METRIC_OP_MIN_SIZE,
    WIRE_METRIC_OP_OBSERVE_MIN_SIZE,
    WIRE_PAD_ALIGN,
    WIRE_RELEASE_MIN_SIZE,
    WIRE_RESPONSE_ENTRY_MIN_SIZE,
    WIRE_TENSOR_MIN_SIZE,
    WIRE_U8_SIZE,
    WIRE_U16_SIZE,
    WIRE_U32_SIZE,
    WIRE_U64_SIZE,
)

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("tritonpy's frame codec assumes a little-endian host")

# Frame types, flags, locations and limits as the module's Python names.
include "_wire.pxi"

cdef uint32_t _MAGIC = MAGIC
cdef int _LAST_TYPE = MAX_FRAME_TYPE
cdef int _EXECUTE_TYPE = EXECUTE  # as a C int: compared without a Python lookup
cdef int _RESPONSES_TYPE = RESPONSES
cdef uint16_t _FLAG_BATCH_DONE = FLAG_BATCH_DONE
cdef uint32_t _RESP_FLAGS = RESP_KNOWN
cdef set _JSON_TYPES = JSON_TYPES


class ProtocolError(ValueError):
    """A frame that does not follow docs/protocol.md."""


include "_decode.pxi"


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
    if _utf8(s, &n) == NULL:
        return len(_utf8_bytes(s))
    return n


cdef inline const char* _utf8(str s, Py_ssize_t* size):
    """The UTF-8 of ``s`` (cached in the str), or NULL when it has none."""
    cdef const char* text = _utf8_or_null(s, size)
    if text == NULL:
        PyErr_Clear()
    return text


cdef bytes _utf8_bytes(str s):
    """Text a model made with a lone surrogate in it: written escaped
    (backslashreplace), so that what it sends is valid UTF-8."""
    return s.encode("utf-8", "backslashreplace")


def clip(str text, Py_ssize_t limit):
    """``text`` whole if its UTF-8 takes at most ``limit`` bytes, else its
    beginning (whole characters) and the marker with its whole length,
    ``limit`` bytes in all (docs/protocol.md, "Text")."""
    cdef Py_ssize_t n
    cdef const char* p = _utf8(text, &n)
    cdef bytes raw
    if p == NULL:
        raw = _utf8_bytes(text)
        n = len(raw)
    if n <= limit:
        return text
    marker = f"{TRUNCATED_START}{n}{TRUNCATED_END}"
    cdef Py_ssize_t keep = max(limit - len(marker), 0)
    if p == NULL:
        head = raw[:keep].decode("utf-8", "ignore")
    else:
        head = PyUnicode_DecodeUTF8(p, keep, "ignore")
    return head + marker


cdef Py_ssize_t entry_size(Entry e) except -1:
    """The most bytes FrameWriter.entry writes for ``e`` (exact but for
    the up to 7 padding bytes before inline data)."""
    # batch id, index, flags, has_error, code, message and parameters
    # lengths, output count
    cdef Py_ssize_t size = WIRE_RESPONSE_ENTRY_MIN_SIZE
    cdef OutTensor o
    if e.error is not None:
        msg = e.error[1]
        return size + (_utf8_size(msg) if type(msg) is str else len(msg))
    size += _utf8_size(e.parameters)
    for o in e.outputs:
        # name, dtype, ndim, dims, byte size, location
        size += WIRE_TENSOR_MIN_SIZE + _utf8_size(o.name) + WIRE_I64_SIZE * len(o.dims)
        if o.data is not None:
            size += WIRE_PAD_ALIGN - 1 + <Py_ssize_t>o.byte_size  # padding, the bytes
        else:
            size += WIRE_ARENA_REF_SIZE  # arena id, reserved, offset
    return size


# ------------------------------------------------------------------ writing


@cython.final
cdef class FrameWriter:
    """Builds one frame at a time in a reusable buffer.

    Usage: ``begin(type, id, flags)``, body writes, then ``finish()`` which
    fills in the header and returns the frame as bytes. Its fields and
    methods are declared in _codec.pxd."""

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

    cpdef begin(self, int ftype, uint64_t fid=0, uint16_t flags=0):
        self.pos = 0
        self.reserve(WIRE_HEADER_SIZE)
        memset(self.buf, 0, WIRE_HEADER_SIZE)
        memcpy(self.buf + WIRE_HEADER_MAGIC_OFFSET, &_MAGIC, WIRE_U32_SIZE)
        self.buf[WIRE_HEADER_VERSION_OFFSET] = VERSION
        self.buf[WIRE_HEADER_TYPE_OFFSET] = <uint8_t>ftype
        memcpy(self.buf + WIRE_HEADER_FLAGS_OFFSET, &flags, WIRE_U16_SIZE)
        memcpy(self.buf + WIRE_HEADER_ID_OFFSET, &fid, WIRE_U64_SIZE)
        self.pos = WIRE_HEADER_SIZE
        self.open = True

    cpdef begin_responses(self, uint32_t count=0, uint64_t batch_id=0, bint batch_done=False):
        """A RESPONSES frame of ``count`` entries (set_count when known only
        later); with ``batch_done`` the frame also ends batch ``batch_id``
        (BATCH_DONE)."""
        self.begin(_RESPONSES_TYPE, batch_id, _FLAG_BATCH_DONE if batch_done else 0)
        self.put(&count, WIRE_U32_SIZE)

    cpdef set_count(self, uint32_t count):
        """The entry count of the RESPONSES frame begun by begin_responses."""
        memcpy(self.buf + WIRE_HEADER_SIZE, &count, WIRE_U32_SIZE)

    cpdef set_flags(self, uint16_t flags):
        memcpy(self.buf + WIRE_HEADER_FLAGS_OFFSET, &flags, WIRE_U16_SIZE)

    cpdef Py_ssize_t size(self):
        return self.pos

    cpdef patch_u32(self, Py_ssize_t at, uint32_t v):
        """Overwrite 4 bytes already written (e.g. a count known only later)."""
        if at < WIRE_HEADER_SIZE or at + WIRE_U32_SIZE > self.pos:
            raise IndexError(f"patch_u32 at {at} outside the body written so far")
        memcpy(self.buf + at, &v, WIRE_U32_SIZE)

    cpdef u8(self, uint8_t v):
        self.put(&v, WIRE_U8_SIZE)

    cpdef u32(self, uint32_t v):
        self.put(&v, WIRE_U32_SIZE)

    cpdef u64(self, uint64_t v):
        self.put(&v, WIRE_U64_SIZE)

    cpdef f64(self, double v):
        self.put(&v, WIRE_F64_SIZE)

    cpdef i64(self, int64_t v):
        self.put(&v, WIRE_I64_SIZE)

    cpdef string(self, s):
        cdef Py_ssize_t size
        cdef const char* text
        cdef bytes raw
        if type(s) is str:
            text = _utf8(s, &size)
            if text != NULL:
                self.len_prefixed(text, size)
                return
            raw = _utf8_bytes(s)
        else:
            raw = _utf8_bytes(s) if isinstance(s, str) else bytes(s)
        self.len_prefixed(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))

    cdef int len_prefixed(self, const char* p, Py_ssize_t size) except -1:
        cdef uint32_t n = <uint32_t>size
        if size > 0xFFFFFFFF:
            raise OverflowError("a string longer than 4 GiB")
        self.put(&n, WIRE_LENGTH_SIZE)
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
        cdef Py_ssize_t n = (WIRE_PAD_ALIGN - self.pos % WIRE_PAD_ALIGN) % WIRE_PAD_ALIGN
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
        return PyBytes_FromStringAndSize(
            <const char*>(self.buf + WIRE_HEADER_SIZE), self.pos - WIRE_HEADER_SIZE)

    cpdef bytes finish(self):
        cdef uint32_t body_len = <uint32_t>(self.pos - WIRE_HEADER_SIZE)
        memcpy(self.buf + WIRE_HEADER_BODY_LEN_OFFSET, &body_len, WIRE_U32_SIZE)
        self.open = False
        return PyBytes_FromStringAndSize(<const char*>self.buf, self.pos)

    cpdef bytes finish_in_arena(self, uint32_t arena_id, uint64_t offset):
        """Replace the body by a reference to the copy the caller placed
        in its arena, and return the short frame."""
        cdef uint32_t body_len = <uint32_t>(self.pos - WIRE_HEADER_SIZE)
        cdef uint16_t flags
        memcpy(&flags, self.buf + WIRE_HEADER_FLAGS_OFFSET, WIRE_U16_SIZE)
        flags |= FLAG_BODY_IN_ARENA
        memcpy(self.buf + WIRE_HEADER_FLAGS_OFFSET, &flags, WIRE_U16_SIZE)
        memcpy(self.buf + WIRE_HEADER_BODY_LEN_OFFSET, &body_len, WIRE_U32_SIZE)
        self.pos = WIRE_HEADER_SIZE
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
    elif ftype == FINALIZE or ftype == IS_READY or ftype == BLS_CANCEL or ftype == BLS_CHANNEL:
        pass
    elif ftype in _JSON_TYPES:
        w.json_body(body)
    else:
        raise ValueError(f"encode_simple does not encode frame type {ftype}")
    return w.finish()


include "_codec_frames.pxi"
