# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Tensor: the model's view of an input or output.

A tensor is born either from the model (``Tensor(name, array)``,
``Tensor.from_dlpack``) or from the wire (``Tensor._from_wire``, used by the
stub). Wire tensors keep the wire buffer and build their numpy view lazily:
a zero-copy view for fixed-size types, a decoded object array for BYTES.
``_to_wire`` hands the stub the bytes to send, avoiding copies when the
buffer already has the wire layout.
"""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import _bytes, _dlpack, _host
from ._core import TensorCore, init_tensor, keep_array
from ._dtypes import (
    FROM_DLPACK,
    ITEMSIZE,
    TO_DLPACK,
    TYPE_BF16,
    TYPE_BYTES,
    TYPE_INVALID,
    WIRE_NAMES,
    WIRE_NUMPY,
    code_of_dtype,
)
from ._errors import TritonModelException
from ._text import describe, text

__all__ = ["Tensor"]

# Outputs up to this size travel inside the frame anyway (a copy): they
# get ordinary memory (stub/_codec.pyx INLINE_LIMIT).
_BLOCK_MIN = 65536

_DL_CPU = 1
_DL_CUDA_HOST = 3


# No tensor larger than the machine's memory can be copied out of a model.
_MEMORY_BYTES = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _check_all_strings(name: str, items: Any) -> None:
    """numpy turns a list mixing str with numbers or None into strings
    ('1', 'None'): refuse that rather than send made-up text."""
    for item in np.asarray(items, dtype=object).reshape(-1):
        if not isinstance(item, (str, bytes)):
            raise TritonModelException(
                f"Tensor '{name}': the {type(items).__name__} mixes strings with "
                f"{type(item).__name__} ({item!r}); numpy would turn it into "
                f"text: pass an array of the dtype you mean"
            )


def _check_name(name: Any) -> str:
    """The tensor name as a plain str (bytes and numpy scalars taken, _text.py)."""
    if type(name) is not str:
        if (s := text(name)) is None:
            raise TritonModelException(f"Tensor name must be a str, got {describe(name)}")
        name = s
    if not name:
        raise TritonModelException("Tensor name cannot be an empty string.")
    return name


def _native(arr: np.ndarray) -> np.ndarray:
    """``arr`` as C-contiguous little-endian bytes (copy only if needed)."""
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return np.ascontiguousarray(arr)


class Tensor(TensorCore):
    """A named tensor. ``Tensor(name, numpy_array)`` keeps the array as is.

    object, bytes (S) and str (U) arrays are BYTES tensors; other supported
    dtypes are bool, (u)int8-64, float16/32/64 and ml_dtypes.bfloat16 (BF16).
    """

    # The fields are TensorCore's (C fields, weak references allowed), as
    # are __init__ for an ndarray of a native dtype, name() and as_numpy().
    __slots__ = ()

    _name: str
    _dtype: int
    _dims: tuple[int, ...]
    _array: np.ndarray | None
    _buf: Any

    # ------------------------------------------------------------ public API

    def triton_dtype(self) -> int:
        """The TRITONSERVER_DataType code (e.g. 11 for FP32)."""
        return self._dtype

    def shape(self) -> list[int]:
        return list(self._dims)

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self) -> Any:
        """A "dltensor" PyCapsule sharing this tensor's memory (CPU)."""
        if self._dtype == TYPE_BYTES:
            raise TritonModelException(
                f"Tensor '{self._name}': DLPack does not have support for string tensors."
            )
        arr = self._fixed_array()
        if not arr.flags.c_contiguous or arr.dtype.byteorder == ">":
            arr = _native(arr)  # DLPack needs native order; we export dense
        code, bits = TO_DLPACK[self._dtype]
        return _dlpack.export(arr, code, bits)

    def __dlpack__(
        self,
        stream: Any = None,
        *,
        max_version: Any = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        if stream is not None and stream != -1:
            raise BufferError("CPU tensors take no stream (stream must be None)")
        if dl_device is not None and tuple(dl_device) != (_DL_CPU, 0):
            raise BufferError(f"cannot export a CPU tensor to device {dl_device}")
        if copy:
            clone = Tensor.__new__(Tensor)
            init_tensor(
                clone, self._name, self._dtype, self._dims, self._fixed_array().copy(), None
            )
            return clone.to_dlpack()
        return self.to_dlpack()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DL_CPU, 0)

    @staticmethod
    def from_dlpack(name: str, tensor: Any) -> Tensor:
        """A Tensor over a DLPack capsule or any object with ``__dlpack__``
        (torch, jax, numpy ...). Zero-copy: the producer stays alive as long
        as the tensor or a view of it does."""
        name = _check_name(name)
        if isinstance(tensor, np.ndarray) and _is_bfloat16(tensor.dtype):
            # numpy cannot export bfloat16 through DLPack; the array itself
            # is shared just the same.
            return Tensor(name, tensor)
        if hasattr(tensor, "__dlpack__"):
            if not hasattr(tensor, "__dlpack_device__"):
                raise TritonModelException(
                    f"Tensor '{name}': object has __dlpack__ but no __dlpack_device__"
                )
            device = tensor.__dlpack_device__()
            if int(device[0]) not in (_DL_CPU, _DL_CUDA_HOST):
                raise TritonModelException(
                    f"Tensor '{name}': DLPack device type {int(device[0])} is "
                    f"not supported yet (CPU tensors only)"
                )
            try:
                capsule = tensor.__dlpack__(stream=None)
            except Exception as exc:  # e.g. numpy refuses read-only arrays
                raise TritonModelException(f"Tensor '{name}': __dlpack__() failed: {exc}") from exc
        else:
            capsule = tensor
        try:
            owner = _dlpack.consume(capsule)
        except (ValueError, TypeError) as exc:
            raise TritonModelException(
                f"Tensor '{name}': {exc}. Provided tensor is not supported: "
                f"it must be a DLPack capsule or have `__dlpack__` and "
                f"`__dlpack_device__` attributes"
            ) from exc
        code = FROM_DLPACK.get((owner.code, owner.bits))
        if code is None:
            raise TritonModelException(
                f"Tensor '{name}': DLPack data type (code {owner.code}, "
                f"{owner.bits} bits) is not supported"
            )
        np_dtype = WIRE_NUMPY[code]
        flat = np.frombuffer(memoryview(owner), dtype=np_dtype, count=owner.extent)
        shape = owner.shape
        strides = owner.strides
        if strides is None or _is_c_contiguous(shape, strides):
            arr = flat.reshape(shape)
        else:
            arr = np.lib.stride_tricks.as_strided(
                flat, shape=shape, strides=tuple(s * np_dtype.itemsize for s in strides)
            )
        result = Tensor.__new__(Tensor)
        init_tensor(result, name, code, tuple(shape), arr, None)
        return result

    @staticmethod
    def empty(name: str, shape: Iterable[int], dtype: Any) -> Tensor:
        """A new tensor whose array the model fills in place, like
        ``numpy.empty`` (the contents start undefined): ``as_numpy()``
        returns it, writable. In a stub, an array over 64 KiB lives in the
        shared memory the backend reads: in a response or a BLS request it
        is not copied on its way out. Fixed-size dtypes only (not BYTES)."""
        name = _check_name(name)
        try:
            np_dtype = np.dtype(dtype)
            dims = tuple(operator.index(d) for d in shape)
        except (TypeError, ValueError) as exc:
            raise TritonModelException(f"Tensor '{name}': {exc}") from exc
        if any(d < 0 for d in dims):
            raise TritonModelException(f"Tensor '{name}': negative dimension in {list(dims)}")
        code = code_of_dtype(np_dtype)
        if code == TYPE_BYTES or (code == TYPE_INVALID and not _is_bfloat16(np_dtype)):
            raise TritonModelException(
                f"Tensor '{name}': Tensor.empty takes a fixed-size dtype (bool, "
                f"(u)int8-64, float16/32/64, ml_dtypes.bfloat16), not {np_dtype}"
            )
        count = math.prod(dims)
        nbytes = count * np_dtype.itemsize
        host = _host.attached()
        if host is None or nbytes <= _BLOCK_MIN or nbytes > _MEMORY_BYTES:
            arr = np.empty(dims, np_dtype)
        else:  # shared memory the backend reads in place
            arr = np.frombuffer(host.arenas.block(nbytes), np_dtype, count).reshape(dims)
        return Tensor(name, arr)

    def __repr__(self) -> str:
        return (
            f"Tensor(name={self._name!r}, dtype={WIRE_NAMES[self._dtype]}, "
            f"shape={list(self._dims)})"
        )

    # ------------------------------------------------------------ stub side

    @classmethod
    def _from_wire(cls, name: str, dtype: int, dims: tuple[int, ...], buf: Any) -> Tensor:
        """A tensor over wire bytes ``buf`` (C-contiguous, writable).

        Fixed-size types get a zero-copy view; BYTES is decoded on first
        ``as_numpy()``. Raises TritonModelException on a size mismatch.
        """
        self = cls.__new__(cls)
        name = _check_name(name)
        if dtype not in ITEMSIZE:
            raise TritonModelException(f"Tensor '{name}': unknown Triton data type code {dtype}")
        dims = tuple(dims)
        for d in dims:
            if d < 0:
                raise TritonModelException(
                    f"Tensor '{name}': negative dimension in shape {list(dims)}"
                )
        view = memoryview(buf)
        if view.ndim != 1 or view.format not in ("B", "b", "c"):
            if view.nbytes == 0:
                view = memoryview(bytearray())
            else:
                view = view.cast("B")  # TypeError if not C-contiguous
        if dtype != TYPE_BYTES:
            expected = math.prod(dims) * ITEMSIZE[dtype]
            if view.nbytes != expected:
                raise TritonModelException(
                    f"Tensor '{name}': {WIRE_NAMES[dtype]} shape {list(dims)} "
                    f"needs {expected} bytes, got {view.nbytes}"
                )
        init_tensor(self, name, dtype, dims, None, view)
        return self

    def _to_wire(self) -> tuple[str, int, tuple[int, ...], Any]:
        """(name, dtype code, dims, buffer of exactly the wire bytes)."""
        dtype = self._dtype
        if self._array is not None and self._array.nbytes > _MEMORY_BYTES:
            # A view (broadcast, memmap) may claim more than could ever be
            # copied: refuse before trying.
            raise TritonModelException(
                f"Tensor '{self._name}' of shape {list(self._array.shape)} is "
                f"{self._array.nbytes} bytes, more than this machine's memory "
                f"({_MEMORY_BYTES} bytes)"
            )
        if self._buf is not None and (dtype != TYPE_BYTES or self._array is None):
            # Untouched wire bytes (or a view onto them) go back as they came.
            return self._name, dtype, self._dims, self._buf
        arr = self._array
        assert arr is not None
        if dtype == TYPE_BYTES:
            try:
                data = _bytes.encode(arr, True)
            except (TypeError, ValueError) as exc:
                raise TritonModelException(
                    f"Tensor '{self._name}': cannot serialize as BYTES: {exc}"
                ) from exc
            return self._name, dtype, self._dims, data
        # A flat uint8 view: the stub can take memoryview(buf) as plain bytes
        # (memoryview.cast refuses multi-dimensional zero-size views). The
        # dims are those the tensor was made with, as the official Tensor
        # sends (an array reshaped in place since keeps its size).
        return self._name, dtype, self._dims, _native(arr).reshape(-1).view(np.uint8)

    # ------------------------------------------------------------ internals

    def _init_general(self, name: str, numpy_array: Any) -> None:
        """``Tensor(name, array)`` beyond TensorCore's fast path: array-likes,
        other dtypes, BF16, and the errors."""
        # Arguments of the wrong type are TypeErrors, checked first, as the
        # official constructor's argument conversion does.
        if numpy_array is None:
            raise TypeError(f"Tensor {name!r}: expected a numpy.ndarray, got None")
        if type(name) is not str and text(name) is None:
            raise TypeError(f"Tensor name must be a str, got {describe(name)}")
        name = _check_name(name)
        if not isinstance(numpy_array, np.ndarray):
            # The official constructor converts array-likes (pybind11
            # py::array); so do we.
            try:
                converted = np.asarray(numpy_array)
            except Exception as exc:
                raise TritonModelException(
                    f"Tensor '{name}': cannot convert "
                    f"{type(numpy_array).__name__} to a numpy array: {exc}"
                ) from exc
            if converted.dtype.kind in "US":
                _check_all_strings(name, numpy_array)
            numpy_array = converted
        code = code_of_dtype(numpy_array.dtype)
        if code == TYPE_INVALID and _is_bfloat16(numpy_array.dtype):
            # ml_dtypes.bfloat16: kept as its bits, as wire BF16 tensors are.
            code = TYPE_BF16
            numpy_array = numpy_array.view(WIRE_NUMPY[TYPE_BF16])
        if code == TYPE_INVALID:
            raise TritonModelException(
                f"Tensor '{name}': numpy dtype {numpy_array.dtype} is not "
                f"supported (use bool, (u)int8-64, float16/32/64, "
                f"ml_dtypes.bfloat16, or np.object_ / bytes / str for BYTES)"
            )
        init_tensor(self, name, code, numpy_array.shape, numpy_array, None)

    def _materialize(self) -> np.ndarray:
        # as_numpy() of a BYTES or BF16 wire tensor (TensorCore views the
        # fixed-size ones itself).
        if self._dtype == TYPE_BF16:
            raise self._bf16_error()
        try:
            flat = _bytes.decode(self._buf, math.prod(self._dims))
        except ValueError as exc:
            raise TritonModelException(
                f"Tensor '{self._name}': malformed BYTES data: {exc}"
            ) from exc
        arr = flat.reshape(self._dims)
        keep_array(self, arr)
        return arr

    def _fixed_array(self) -> np.ndarray:
        """The array of a fixed-size tensor, BF16 included (as uint16)."""
        arr = self._array
        if arr is None:
            arr = np.frombuffer(self._buf, dtype=WIRE_NUMPY[self._dtype]).reshape(self._dims)
            keep_array(self, arr)
        return arr

    def _bf16_error(self) -> TritonModelException:
        return TritonModelException(
            f"Tensor '{self._name}': Tensor dtype is BF16 and cannot be "
            f"converted to NumPy. Use to_dlpack() and from_dlpack() instead."
        )


def _is_bfloat16(dtype: np.dtype[Any]) -> bool:
    # ml_dtypes.bfloat16, recognised without importing ml_dtypes.
    return dtype.kind == "V" and dtype.itemsize == 2 and dtype.name == "bfloat16"


def _is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    expected = 1
    for dim, stride in zip(reversed(shape), reversed(strides), strict=True):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True
