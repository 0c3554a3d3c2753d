# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
# The wire records of the stub (docs/protocol.md), declared once: those it
# encodes, which the compiled modules that build them (_batch.pyx) cimport,
# with the writer of their frames (_engine.pyx, _batch.pyx),
# and those it decodes, which the compiled modules that read them
# (_batch.pyx, _bls_wire.pyx) cimport to read their fields in C. Python
# code reads the fields by name (_codec.pyi); nobody writes them.

cimport cython
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef class OutTensor:
    """One output tensor of a RESPONSES entry: its bytes inline (``data``)
    or in an arena (``location`` LOC_ARENA: the stub's own, LOC_RECEIVER_ARENA:
    the backend's), at ``arena_id``/``offset``."""
    cdef readonly str name
    cdef readonly uint32_t dtype
    cdef readonly tuple dims
    cdef readonly object data  # bytes when inline, else None
    cdef readonly uint32_t arena_id
    cdef readonly uint64_t offset
    cdef readonly uint64_t byte_size
    cdef readonly uint8_t location


cdef class Entry:
    """One RESPONSES entry: the answer (or error, or bare flags) to
    request ``index`` of batch ``batch_id``."""
    cdef readonly uint64_t batch_id
    cdef readonly uint32_t index
    cdef public uint32_t flags  # RESP_*; the batch's last entry gains BATCH_END
    cdef readonly object error  # None, or (code, message)
    cdef readonly str parameters  # JSON text, "" for none
    cdef readonly tuple outputs  # OutTensor


@cython.final
cdef class FrameWriter:
    """Builds one frame at a time in a reusable buffer (_codec.pyx): the
    request path writes RESPONSES frames with it, in C."""
    cdef uint8_t* buf
    cdef Py_ssize_t cap
    cdef Py_ssize_t pos
    cdef bint open

    cdef int reserve(self, Py_ssize_t n) except -1

    cdef inline int put(self, const void* src, Py_ssize_t n) except -1:
        if n > self.cap - self.pos:  # (the call only when the buffer must grow)
            self.reserve(n)
        memcpy(self.buf + self.pos, src, n)
        self.pos += n
        return 0

    cpdef begin(self, int ftype, uint64_t fid=*, uint16_t flags=*)
    cpdef begin_responses(self, uint32_t count=*, uint64_t batch_id=*, bint batch_done=*)
    cpdef set_count(self, uint32_t count)
    cpdef set_flags(self, uint16_t flags)
    cpdef Py_ssize_t size(self)
    cpdef patch_u32(self, Py_ssize_t at, uint32_t v)
    cpdef u8(self, uint8_t v)
    cpdef u32(self, uint32_t v)
    cpdef u64(self, uint64_t v)
    cpdef f64(self, double v)
    cpdef i64(self, int64_t v)
    cpdef string(self, s)
    cdef int len_prefixed(self, const char* p, Py_ssize_t size) except -1
    cpdef raw(self, data)
    cpdef pad8(self)
    cpdef tensor_head(self, str name, uint32_t dtype, tuple dims, uint64_t byte_size)
    cpdef tensor_inline(self, str name, uint32_t dtype, tuple dims, data)
    cdef int _inline(self, str name, uint32_t dtype, tuple dims,
                     const void* p, Py_ssize_t n) except -1
    cpdef entry(self, Entry e)
    cpdef tensor_arena(self, str name, uint32_t dtype, tuple dims, uint64_t byte_size,
                       uint32_t arena_id, uint64_t offset, uint8_t location=*)
    cpdef json_body(self, dict obj)
    cpdef bytes body_bytes(self)
    cpdef bytes finish(self)
    cpdef bytes finish_in_arena(self, uint32_t arena_id, uint64_t offset)


cdef OutTensor out_inline(str name, uint32_t dtype, tuple dims, bytes data)
cdef OutTensor out_arena(str name, uint32_t dtype, tuple dims, uint64_t byte_size,
                         uint32_t arena_id, uint64_t offset, uint8_t location)
cdef Entry make_entry(uint64_t batch_id, uint32_t index, uint32_t flags, object error,
                      str parameters, tuple outputs)
cdef Py_ssize_t entry_size(Entry e) except -1

# The decoder's C entry points (_decode.pxi), for a message at ``p`` of
# ``n`` bytes: its checked header (type, flags, id, body_len), and its body
# from ``start`` (decode_body's results).
cdef tuple _decode_header(const uint8_t* p, Py_ssize_t n)
cdef object _decode_body(int ftype, const uint8_t* p, Py_ssize_t n, Py_ssize_t start)


# ------------------------------------------------------------------ decoded
# Made by the decoder only (_decode.pxi), field by field in C.


cdef class WireTensor:
    """A decoded tensor: an EXECUTE or BLS_REQUEST input, a RESPONSES or
    BLS_RESPONSE output. Its bytes are inline, ``offset`` bytes into the
    decoded buffer (``location`` LOC_INLINE), or in an arena at
    ``arena_id``/``arena_offset`` (LOC_ARENA: the sender's,
    LOC_RECEIVER_ARENA: the receiver's)."""
    cdef readonly str name
    cdef readonly uint32_t dtype
    cdef readonly tuple dims
    cdef readonly uint64_t byte_size
    cdef readonly uint8_t location
    cdef readonly Py_ssize_t offset  # inline only, else 0
    cdef readonly uint32_t arena_id  # arena only, else 0
    cdef readonly uint64_t arena_offset  # arena only, else 0


cdef class WireRequest:
    """A request entry of EXECUTE or BLS_REQUEST."""
    cdef readonly str request_id
    cdef readonly object correlation_id  # None, an int or a str
    cdef readonly uint32_t flags
    cdef readonly uint64_t timeout_us
    cdef readonly str parameters  # JSON text, "" for none
    cdef readonly tuple requested_output_names  # str
    cdef readonly tuple inputs  # WireTensor
    cdef readonly str trace_context


cdef class BlsRequest:
    """The body of a BLS_REQUEST (the stub sends it: decoded in tests)."""
    cdef readonly str model_name
    cdef readonly int64_t model_version
    cdef readonly uint64_t trace_batch_id  # 0: the call continues no trace
    cdef readonly uint32_t trace_request_index
    cdef readonly WireRequest request


cdef class WireResponse:
    """A BLS_RESPONSE body, or one entry of RESPONSES (which only the
    entry's ``batch_id`` and ``request_index`` tell apart; 0 in a
    BLS_RESPONSE)."""
    cdef readonly uint64_t batch_id
    cdef readonly uint32_t request_index
    cdef readonly uint32_t flags  # RESP_*
    cdef readonly bint has_error
    cdef readonly uint32_t error_code  # TRITONSERVER_Error_Code, 0 unless has_error
    cdef readonly str error_message  # "" unless has_error
    cdef readonly str parameters  # JSON text, "" for none
    cdef readonly tuple outputs  # WireTensor


cdef class MetricOp:
    """One operation of a METRIC frame (the stub sends them: decoded in
    tests); the fields its ``op`` does not carry are 0 or empty."""
    cdef readonly uint8_t op  # OP_*
    cdef readonly uint32_t family  # FAMILY_NEW, FAMILY_DELETE, METRIC_NEW
    cdef readonly uint32_t metric  # METRIC_NEW and the ops on one metric
    cdef readonly uint32_t kind  # FAMILY_NEW
    cdef readonly str name  # FAMILY_NEW
    cdef readonly str description  # FAMILY_NEW
    cdef readonly tuple labels  # METRIC_NEW: ((key, value), ...)
    cdef readonly tuple values  # METRIC_NEW: the buckets; OBSERVE: the values
    cdef readonly double value  # INCREMENT, SET
