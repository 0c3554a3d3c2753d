# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Codec of Triton's BYTES tensor serialization.

Each element is a 4-byte little-endian unsigned length followed by that many
bytes; elements follow one another in C order with no padding. Errors are
raised as ValueError/TypeError with the position; the Python layer adds the
tensor name and turns them into TritonModelException.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Check, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject
from cpython.unicode cimport PyUnicode_Check
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import numpy as np

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL

cdef uint64_t _MAX_ELEMENT = 0xFFFFFFFF


cdef inline uint32_t _load_u32le(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
            | (<uint32_t>p[3] << 24))


cdef inline void _store_u32le(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = v & 0xFF
    p[1] = (v >> 8) & 0xFF
    p[2] = (v >> 16) & 0xFF
    p[3] = (v >> 24) & 0xFF


cdef inline Py_ssize_t _unpadded_u8(const unsigned char* p, Py_ssize_t k) noexcept nogil:
    # Length of a fixed-width numpy 'S' element without its trailing NULs.
    while k > 0 and p[k - 1] == 0:
        k -= 1
    return k


cdef inline Py_ssize_t _unpadded_u32(const uint32_t* p, Py_ssize_t k) noexcept nogil:
    # Code points of a fixed-width numpy 'U' element without its trailing NULs.
    while k > 0 and p[k - 1] == 0:
        k -= 1
    return k


cdef inline Py_ssize_t _utf8_len(uint32_t cp) noexcept nogil:
    # -1 for code points UTF-8 cannot carry (surrogates, > U+10FFFF).
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return -1 if 0xD800 <= cp <= 0xDFFF else 3
    if cp <= 0x10FFFF:
        return 4
    return -1


cdef inline unsigned char* _put_utf8(unsigned char* p, uint32_t cp) noexcept nogil:
    if cp < 0x80:
        p[0] = cp
        return p + 1
    if cp < 0x800:
        p[0] = 0xC0 | (cp >> 6)
        p[1] = 0x80 | (cp & 0x3F)
        return p + 2
    if cp < 0x10000:
        p[0] = 0xE0 | (cp >> 12)
        p[1] = 0x80 | ((cp >> 6) & 0x3F)
        p[2] = 0x80 | (cp & 0x3F)
        return p + 3
    p[0] = 0xF0 | (cp >> 18)
    p[1] = 0x80 | ((cp >> 12) & 0x3F)
    p[2] = 0x80 | ((cp >> 6) & 0x3F)
    p[3] = 0x80 | (cp & 0x3F)
    return p + 4


cdef object _check_total(uint64_t total):
    if total > <uint64_t>0x7FFFFFFFFFFFFFFF:
        raise ValueError("serialized BYTES tensor is too large")


cdef bytes _encode_list(list items, bint strict):
    # Pass 1 resolves each element to (pointer, length) and sums the size;
    # pass 2 copies. `items` keeps the elements (and their cached UTF-8
    # forms) alive between passes; `keep` holds str() conversions.
    cdef Py_ssize_t n = PyList_GET_SIZE(items)
    cdef const char** ptrs = <const char**>malloc(max(n, 1) * sizeof(char*))
    cdef Py_ssize_t* lens = <Py_ssize_t*>malloc(max(n, 1) * sizeof(Py_ssize_t))
    cdef list keep = []
    cdef Py_ssize_t i, size
    cdef uint64_t total = 0
    cdef object item, conv
    cdef const char* ptr
    cdef unsigned char* out
    cdef bytes result
    if ptrs == NULL or lens == NULL:
        free(ptrs)
        free(lens)
        raise MemoryError()
    try:
        for i in range(n):
            item = <object>PyList_GET_ITEM(items, i)
            if PyBytes_Check(item):
                ptr = PyBytes_AS_STRING(item)
                size = PyBytes_GET_SIZE(item)
            elif PyUnicode_Check(item):
                try:
                    ptr = PyUnicode_AsUTF8AndSize(item, &size)
                except UnicodeEncodeError as exc:
                    raise ValueError(
                        f"element {i} is a str that is not valid UTF-8: {exc}") from None
            elif PyByteArray_Check(item):
                ptr = PyByteArray_AS_STRING(item)
                size = PyByteArray_GET_SIZE(item)
            elif strict:
                raise TypeError(
                    f"element {i} has type {type(item).__name__}; BYTES tensors "
                    f"hold bytes or str only")
            else:
                # The official serialize_byte_tensor str()-converts anything else.
                conv = str(item).encode("utf-8")
                keep.append(conv)
                ptr = PyBytes_AS_STRING(conv)
                size = PyBytes_GET_SIZE(conv)
            if <uint64_t>size > _MAX_ELEMENT:
                raise ValueError(f"element {i} is {size} bytes, over the 4 GiB limit")
            ptrs[i] = ptr
            lens[i] = size
            total += 4 + <uint64_t>size
        _check_total(total)
        result = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
        out = <unsigned char*>PyBytes_AS_STRING(result)
        with nogil:
            for i in range(n):
                _store_u32le(out, <uint32_t>lens[i])
                memcpy(out + 4, ptrs[i], lens[i])
                out += 4 + lens[i]
        return result
    finally:
        free(ptrs)
        free(lens)


cdef bytes _encode_fixed_bytes(object arr):
    # numpy 'S' array, C-contiguous: each element is itemsize bytes with
    # trailing NULs that numpy strips on read; strip them here too.
    cdef Py_buffer view
    cdef Py_ssize_t k = arr.dtype.itemsize
    cdef Py_ssize_t n = arr.size
    cdef Py_ssize_t i, size
    cdef uint64_t total = 0
    cdef const unsigned char* base
    cdef const unsigned char* src
    cdef unsigned char* out
    cdef bytes result
    PyObject_GetBuffer(arr, &view, PyBUF_SIMPLE)
    try:
        base = <const unsigned char*>view.buf
        with nogil:
            for i in range(n):
                src = base + i * k
                size = _unpadded_u8(src, k)
                total += 4 + <uint64_t>size
        _check_total(total)
        result = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
        out = <unsigned char*>PyBytes_AS_STRING(result)
        with nogil:
            for i in range(n):
                src = base + i * k
                size = _unpadded_u8(src, k)
                _store_u32le(out, <uint32_t>size)
                memcpy(out + 4, src, size)
                out += 4 + size
        return result
    finally:
        PyBuffer_Release(&view)


cdef bytes _encode_fixed_unicode(object arr):
    # numpy 'U' array, C-contiguous, native byte order: each element is
    # itemsize/4 UCS4 code points, trailing NULs stripped; written as UTF-8.
    cdef Py_buffer view
    cdef Py_ssize_t k = arr.dtype.itemsize // 4
    cdef Py_ssize_t n = arr.size
    cdef Py_ssize_t i, j, nchars, enc, clen
    cdef uint64_t total = 0
    cdef const uint32_t* base
    cdef const uint32_t* src
    cdef unsigned char* out
    cdef unsigned char* start
    cdef bytes result
    cdef Py_ssize_t bad_elem = -1
    cdef uint32_t bad_cp = 0
    PyObject_GetBuffer(arr, &view, PyBUF_SIMPLE)
    try:
        base = <const uint32_t*>view.buf
        with nogil:
            for i in range(n):
                src = base + i * k
                nchars = _unpadded_u32(src, k)
                enc = 0
                for j in range(nchars):
                    clen = _utf8_len(src[j])
                    if clen < 0:
                        bad_elem = i
                        bad_cp = src[j]
                        break
                    enc += clen
                if bad_elem >= 0:
                    break
                if <uint64_t>enc > _MAX_ELEMENT:
                    bad_elem = i
                    break
                total += 4 + <uint64_t>enc
        if bad_elem >= 0:
            if bad_cp:
                raise ValueError(
                    f"element {bad_elem} holds code point U+{bad_cp:04X}, "
                    f"which UTF-8 cannot encode")
            raise ValueError(f"element {bad_elem} is over the 4 GiB limit")
        _check_total(total)
        result = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
        out = <unsigned char*>PyBytes_AS_STRING(result)
        with nogil:
            for i in range(n):
                src = base + i * k
                nchars = _unpadded_u32(src, k)
                start = out
                out += 4
                for j in range(nchars):
                    out = _put_utf8(out, src[j])
                _store_u32le(start, <uint32_t>(out - start - 4))
        return result
    finally:
        PyBuffer_Release(&view)


def encode(arr, bint strict=True):
    """Serialize a numpy array of dtype object, S or U, in C order.

    strict: object elements must be bytes, bytearray or str (TypeError
    otherwise); when false, other objects are written as str(obj) in UTF-8,
    as the official serialize_byte_tensor does.
    """
    kind = arr.dtype.kind
    if kind == "O":
        # ravel() is a view for C-contiguous arrays; tolist() hands back the
        # element objects themselves.
        return _encode_list(np.ravel(arr, order="C").tolist(), strict)
    if kind == "S":
        return _encode_fixed_bytes(np.ascontiguousarray(arr))
    if kind == "U":
        native = arr.dtype.newbyteorder("=")
        return _encode_fixed_unicode(np.ascontiguousarray(arr, dtype=native))
    raise TypeError(f"cannot serialize numpy dtype {arr.dtype} as BYTES")


def decode(buf, Py_ssize_t expected=-1):
    """Deserialize BYTES wire data into a 1-D numpy object array of bytes.

    buf: any C-contiguous buffer. expected: the element count the dims
    promise, or -1 to take as many elements as the data holds. Raises
    ValueError on truncated or inconsistent data; never reads out of bounds.
    """
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t size, off = 0, count = 0, i
    cdef uint32_t length
    cdef Py_buffer slots_view
    cdef PyObject** slots
    cdef object item, out
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        size = view.len
        # Pass 1: validate the framing and count the elements.
        while off < size and (expected < 0 or count < expected):
            if size - off < 4:
                raise ValueError(
                    f"truncated length prefix at byte {off}: {size - off} "
                    f"byte(s) left, 4 needed")
            length = _load_u32le(p + off)
            off += 4
            if <uint64_t>length > <uint64_t>(size - off):
                raise ValueError(
                    f"element {count} at byte {off - 4} claims {length} bytes "
                    f"but only {size - off} remain")
            off += length
            count += 1
        if expected >= 0:
            if count < expected:
                raise ValueError(
                    f"data holds {count} element(s), the shape needs {expected}")
            if off != size:
                raise ValueError(
                    f"{size - off} trailing byte(s) after the {expected} "
                    f"element(s) the shape needs")
        # Pass 2: build the bytes objects straight into a fresh object array
        # (its slots start as None references, replaced one by one).
        out = np.empty(count, dtype=object)
        PyObject_GetBuffer(out, &slots_view, PyBUF_WRITABLE)
        try:
            slots = <PyObject**>slots_view.buf
            off = 0
            for i in range(count):
                length = _load_u32le(p + off)
                item = PyBytes_FromStringAndSize(<const char*>(p + off + 4), length)
                Py_INCREF(item)  # the slot's reference
                Py_XDECREF(slots[i])
                slots[i] = <PyObject*>item
                off += 4 + length
        finally:
            PyBuffer_Release(&slots_view)
    finally:
        PyBuffer_Release(&view)
    return out
