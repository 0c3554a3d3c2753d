# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
# The wire records the stub encodes (docs/protocol.md), declared once: the
# compiled modules that build them (_batch.pyx) cimport them, _codec.pyx
# encodes them and computes their sizes.

from libc.stdint cimport uint8_t, uint32_t, uint64_t


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


cdef OutTensor out_inline(str name, uint32_t dtype, tuple dims, bytes data)
cdef OutTensor out_arena(str name, uint32_t dtype, tuple dims, uint64_t byte_size,
                         uint32_t arena_id, uint64_t offset, uint8_t location)
cdef Entry make_entry(uint64_t batch_id, uint32_t index, uint32_t flags, object error,
                      str parameters, tuple outputs)
cdef Py_ssize_t entry_size(Entry e) except -1
