# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3, boundscheck=False, wraparound=False
"""DLPack (unversioned ABI, capsule name "dltensor") producer and consumer
for CPU memory.

Producer: `export(arr, code, bits)` wraps a C-contiguous buffer in a capsule;
the capsule (then the consumer) holds a buffer view of the exporter, released
by the DLManagedTensor deleter.
Consumer: `consume(capsule)` takes ownership of a producer's tensor, renames
the capsule "used_dltensor" and returns an owner object whose lifetime ends
with the producer's deleter; the owner exports the bytes through the buffer
protocol so numpy views can sit on it.
"""

from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBUF_ND, PyBuffer_Release, PyObject_GetBuffer
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint64_t
from libc.stdlib cimport free, malloc

cdef extern from *:
    """
    /* DLPack ABI (dlpack.h, unversioned form), declared here. */
    typedef struct { int32_t device_type; int32_t device_id; } tp_DLDevice;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } tp_DLDataType;
    typedef struct {
        void* data;
        tp_DLDevice device;
        int32_t ndim;
        tp_DLDataType dtype;
        int64_t* shape;
        int64_t* strides;
        uint64_t byte_offset;
    } tp_DLTensor;
    typedef struct tp_DLManagedTensor {
        tp_DLTensor dl_tensor;
        void* manager_ctx;
        void (*deleter)(struct tp_DLManagedTensor*);
    } tp_DLManagedTensor;
    """
    ctypedef struct DLDevice "tp_DLDevice":
        int32_t device_type
        int32_t device_id
    ctypedef struct DLDataType "tp_DLDataType":
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct DLTensor "tp_DLTensor":
        void* data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset
    ctypedef struct DLManagedTensor "tp_DLManagedTensor":
        DLTensor dl_tensor
        void* manager_ctx
        void (*deleter)(DLManagedTensor*) noexcept nogil

cdef extern from "Python.h":
    # Declared on PyObject* so the capsule destructor never touches refcounts.
    bint _capsule_is_valid "PyCapsule_IsValid"(PyObject*, const char*) noexcept
    void* _capsule_pointer "PyCapsule_GetPointer"(PyObject*, const char*) noexcept
    object PyCapsule_New(void*, const char*, void (*)(PyObject*) noexcept)
    bint PyCapsule_IsValid(object, const char*)
    void* PyCapsule_GetPointer(object, const char*) except? NULL
    int PyCapsule_SetName(object, const char*) except -1
    void PyErr_Clear() noexcept

# DLDeviceType values (dlpack.h).
DEVICE_CPU = 1
DEVICE_CUDA = 2
DEVICE_CUDA_HOST = 3

cdef const char* _NAME = "dltensor"
cdef const char* _USED_NAME = "used_dltensor"
cdef char* _FORMAT_B = "B"


# ---------------------------------------------------------------- producer

ctypedef struct _ExportCtx:
    DLManagedTensor managed
    Py_buffer view        # keeps the exporter alive and its memory pinned
    int64_t shape[64]


cdef void _export_deleter(DLManagedTensor* m) noexcept nogil:
    # May be called by a consumer without the GIL held.
    cdef _ExportCtx* ctx = <_ExportCtx*>m.manager_ctx
    with gil:
        PyBuffer_Release(&ctx.view)
    free(ctx)


cdef void _export_capsule_destructor(PyObject* capsule) noexcept:
    # Only a capsule nobody consumed still carries the original name.
    cdef DLManagedTensor* m
    if _capsule_is_valid(capsule, _NAME):
        m = <DLManagedTensor*>_capsule_pointer(capsule, _NAME)
        if m != NULL and m.deleter != NULL:
            m.deleter(m)
    else:
        PyErr_Clear()


def export(arr, int code, int bits):
    """Return a "dltensor" capsule over `arr` (a C-contiguous numpy array).

    code/bits: the DLDataType to announce (the bytes are not reinterpreted,
    so a uint16 array can be exported as bfloat16).
    """
    cdef int ndim = arr.ndim
    cdef int i
    cdef _ExportCtx* ctx
    if ndim > 64:
        raise ValueError(f"{ndim} dimensions is over the limit of 64")
    ctx = <_ExportCtx*>malloc(sizeof(_ExportCtx))
    if ctx == NULL:
        raise MemoryError()
    try:
        PyObject_GetBuffer(arr, &ctx.view, PyBUF_C_CONTIGUOUS)
    except BaseException:
        free(ctx)
        raise
    shape = arr.shape
    for i in range(ndim):
        ctx.shape[i] = shape[i]
    ctx.managed.dl_tensor.data = ctx.view.buf
    ctx.managed.dl_tensor.device.device_type = DEVICE_CPU
    ctx.managed.dl_tensor.device.device_id = 0
    ctx.managed.dl_tensor.ndim = ndim
    ctx.managed.dl_tensor.dtype.code = code
    ctx.managed.dl_tensor.dtype.bits = bits
    ctx.managed.dl_tensor.dtype.lanes = 1
    ctx.managed.dl_tensor.shape = ctx.shape
    ctx.managed.dl_tensor.strides = NULL  # C-contiguous
    ctx.managed.dl_tensor.byte_offset = 0
    ctx.managed.manager_ctx = ctx
    ctx.managed.deleter = _export_deleter
    try:
        return PyCapsule_New(&ctx.managed, _NAME, _export_capsule_destructor)
    except BaseException:
        _export_deleter(&ctx.managed)
        raise


# ---------------------------------------------------------------- consumer

cdef class DLPackOwner:
    """Owns a consumed DLManagedTensor; exports its bytes as a flat buffer.

    The buffer spans exactly the elements the tensor addresses (from its
    data pointer plus byte_offset), so strided views stay in bounds.
    """

    cdef DLManagedTensor* _managed
    cdef char* _data
    cdef Py_ssize_t _nbytes
    cdef readonly int code
    cdef readonly int bits
    cdef readonly int device_type
    cdef readonly tuple shape
    cdef readonly object strides   # tuple of element strides, or None
    cdef readonly Py_ssize_t extent  # elements the buffer spans

    def __cinit__(self):
        self._managed = NULL

    def __dealloc__(self):
        if self._managed != NULL and self._managed.deleter != NULL:
            self._managed.deleter(self._managed)
        self._managed = NULL

    def __getbuffer__(self, Py_buffer* view, int flags):
        view.buf = self._data
        view.obj = self
        view.len = self._nbytes
        view.readonly = 0
        view.itemsize = 1
        if flags & PyBUF_FORMAT:
            view.format = _FORMAT_B
        else:
            view.format = NULL
        view.ndim = 1
        if flags & PyBUF_ND:
            view.shape = &self._nbytes
        else:
            view.shape = NULL
        view.strides = NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef Py_ssize_t _extent(DLTensor* t) except -2:
    # Elements spanned by the tensor; 0 if any dim is 0. Negative strides
    # would reach below the data pointer: refused.
    cdef int i
    cdef int64_t span = 1
    for i in range(t.ndim):
        if t.shape[i] < 0:
            raise ValueError(f"negative dimension {t.shape[i]}")
        if t.shape[i] == 0:
            return 0
    if t.strides == NULL:
        for i in range(t.ndim):
            span *= t.shape[i]
        return span
    for i in range(t.ndim):
        if t.strides[i] < 0:
            raise ValueError("DLPack tensors with negative strides are not supported")
        span += (t.shape[i] - 1) * t.strides[i]
    return span


def consume(capsule):
    """Take ownership of a "dltensor" capsule; return a DLPackOwner."""
    cdef DLManagedTensor* m
    cdef DLTensor* t
    cdef DLPackOwner owner
    cdef Py_ssize_t extent
    cdef int i, nbytes_per
    if not PyCapsule_IsValid(capsule, _NAME):
        PyErr_Clear()
        if PyCapsule_IsValid(capsule, _USED_NAME):
            raise ValueError("this DLPack capsule was already consumed")
        PyErr_Clear()
        raise ValueError("expected a DLPack capsule named 'dltensor'")
    m = <DLManagedTensor*>PyCapsule_GetPointer(capsule, _NAME)
    t = &m.dl_tensor
    # Check before taking ownership: on refusal the capsule stays usable and
    # its own destructor frees the tensor.
    if t.device.device_type != DEVICE_CPU and t.device.device_type != DEVICE_CUDA_HOST:
        raise ValueError(
            f"DLPack device type {t.device.device_type} is not supported "
            f"(CPU tensors only)")
    if t.dtype.lanes != 1:
        raise ValueError(f"DLPack tensors with {t.dtype.lanes} lanes are not supported")
    if t.ndim < 0 or (t.ndim > 0 and t.shape == NULL):
        raise ValueError("malformed DLPack tensor shape")
    if t.dtype.bits % 8 != 0 or t.dtype.bits == 0:
        raise ValueError(f"DLPack element width of {t.dtype.bits} bits is not supported")
    extent = _extent(t)
    owner = DLPackOwner.__new__(DLPackOwner)
    owner.code = t.dtype.code
    owner.bits = t.dtype.bits
    owner.device_type = t.device.device_type
    owner.shape = tuple([t.shape[i] for i in range(t.ndim)])
    owner.strides = (None if t.strides == NULL
                     else tuple([t.strides[i] for i in range(t.ndim)]))
    owner.extent = extent
    nbytes_per = t.dtype.bits // 8
    owner._data = <char*>t.data + t.byte_offset
    owner._nbytes = extent * nbytes_per
    PyCapsule_SetName(capsule, _USED_NAME)
    owner._managed = m
    return owner
