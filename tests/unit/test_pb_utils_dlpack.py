# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""pb_utils DLPack: producer (to_dlpack, __dlpack__) and consumer
(Tensor.from_dlpack) with numpy; torch and jax when installed."""

from __future__ import annotations

import ctypes
import gc
import sys

import numpy as np
import pytest

from tritonpy.pb_utils import Tensor, TritonModelException

FIXED_TYPES = [
    np.bool_,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.float16,
    np.float32,
    np.float64,
]


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def capsule_tensor(capsule) -> _DLTensor:
    """Read the DLTensor inside a "dltensor" capsule (without consuming it)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return _DLTensor.from_address(get(capsule, b"dltensor"))


def sample(np_type, shape=(2, 3)):
    n = int(np.prod(shape))
    if np_type is np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    return np.arange(n).astype(np_type).reshape(shape)


# ------------------------------------------------------------------ producer


@pytest.mark.parametrize("np_type", FIXED_TYPES, ids=lambda t: np.dtype(t).name)
def test_numpy_from_tensor_shares_memory(np_type):
    arr = sample(np_type)
    t = Tensor("T", arr)
    view = np.from_dlpack(t)
    assert view.dtype == arr.dtype and view.shape == arr.shape
    np.testing.assert_array_equal(view, arr)
    assert np.shares_memory(view, arr)
    assert t.__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("np_type", FIXED_TYPES, ids=lambda t: np.dtype(t).name)
def test_wire_tensor_to_numpy_via_dlpack(np_type):
    arr = sample(np_type)
    raw = bytearray(arr.tobytes())
    t = Tensor._from_wire("W", Tensor("x", arr).triton_dtype(), arr.shape, memoryview(raw))
    view = np.from_dlpack(t)
    np.testing.assert_array_equal(view, arr)
    raw[: arr.itemsize] = arr.reshape(-1)[1:2].tobytes()
    assert view.reshape(-1)[0] == arr.reshape(-1)[1]  # zero-copy onto the wire buffer


def test_capsule_dtype_and_shape_fields():
    cap = Tensor("T", np.zeros((2, 5), dtype=np.float32)).to_dlpack()
    dl = capsule_tensor(cap)
    assert (dl.device.device_type, dl.device.device_id) == (1, 0)
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 32, 1)
    assert dl.ndim == 2 and [dl.shape[0], dl.shape[1]] == [2, 5]
    assert not dl.strides and dl.byte_offset == 0
    cap = Tensor("B", np.zeros(3, dtype=np.bool_)).to_dlpack()
    assert (capsule_tensor(cap).dtype.code, capsule_tensor(cap).dtype.bits) == (6, 8)


def test_non_contiguous_tensor_exports_dense_copy():
    base = np.arange(12, dtype=np.int64).reshape(3, 4)
    arr = base[:, ::2]
    view = np.from_dlpack(Tensor("NC", arr))
    np.testing.assert_array_equal(view, arr)
    assert view.flags.c_contiguous


def test_zero_size_and_scalar_export():
    assert np.from_dlpack(Tensor("E", np.zeros((0, 4), np.float32))).shape == (0, 4)
    s = np.from_dlpack(Tensor("S", np.array(3.5, np.float64)))
    assert s.shape == () and s[()] == 3.5


def test_bytes_tensor_has_no_dlpack():
    t = Tensor("S", np.array([b"a"], dtype=object))
    with pytest.raises(TritonModelException, match="string tensors"):
        t.to_dlpack()
    with pytest.raises(TritonModelException):
        np.from_dlpack(t)


def test_unconsumed_capsule_releases_its_array():
    arr = np.arange(10, dtype=np.float32)
    before = sys.getrefcount(arr)
    cap = Tensor("T", arr).to_dlpack()
    assert sys.getrefcount(arr) > before
    del cap
    gc.collect()
    assert sys.getrefcount(arr) == before


def test_dlpack_kwargs():
    t = Tensor("T", np.arange(4, dtype=np.int32))
    assert capsule_tensor(t.__dlpack__(stream=None, max_version=(1, 0))).ndim == 1
    copied = t.__dlpack__(copy=True)
    assert capsule_tensor(copied).data != t.as_numpy().ctypes.data
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        t.__dlpack__(stream=5)


# ------------------------------------------------------------------ consumer


@pytest.mark.parametrize("np_type", FIXED_TYPES, ids=lambda t: np.dtype(t).name)
def test_from_dlpack_numpy_zero_copy(np_type):
    arr = sample(np_type)
    t = Tensor.from_dlpack("D", arr)
    assert t.name() == "D" and t.shape() == [2, 3]
    assert t.triton_dtype() == Tensor("x", arr).triton_dtype()
    out = t.as_numpy()
    np.testing.assert_array_equal(out, arr)
    assert np.shares_memory(out, arr)
    name, dtype, dims, buf = t._to_wire()
    assert bytes(memoryview(buf).cast("B")) == arr.tobytes()


def test_from_dlpack_capsule_and_double_use():
    src = Tensor("T", np.arange(6, dtype=np.float64))
    cap = src.to_dlpack()
    t = Tensor.from_dlpack("C", cap)
    np.testing.assert_array_equal(t.as_numpy(), np.arange(6))
    with pytest.raises(TritonModelException, match="already consumed"):
        Tensor.from_dlpack("C2", cap)


def test_from_dlpack_keeps_producer_alive():
    arr = np.arange(1000, dtype=np.int32) * 3
    expected = arr.copy()
    t = Tensor.from_dlpack("K", arr)
    del arr
    gc.collect()
    np.testing.assert_array_equal(t.as_numpy(), expected)
    view = t.as_numpy()
    del t
    gc.collect()
    np.testing.assert_array_equal(view, expected)


def test_from_dlpack_strided_producer():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for arr in (base[:, ::2], base.T, base[1:3, 2:5]):
        t = Tensor.from_dlpack("S", arr)
        np.testing.assert_array_equal(t.as_numpy(), arr)
        assert np.shares_memory(t.as_numpy(), base)
        name, dtype, dims, buf = t._to_wire()
        assert dims == arr.shape
        assert bytes(memoryview(buf).cast("B")) == np.ascontiguousarray(arr).tobytes()


def test_from_dlpack_zero_size_and_scalar():
    assert Tensor.from_dlpack("E", np.zeros((3, 0), np.int16)).shape() == [3, 0]
    s = Tensor.from_dlpack("S", np.array(7, np.int64))
    assert s.shape() == [] and s.as_numpy()[()] == 7


def test_from_dlpack_rejects():
    with pytest.raises(TritonModelException, match="empty string"):
        Tensor.from_dlpack("", np.zeros(1))
    with pytest.raises(TritonModelException, match="not supported"):
        Tensor.from_dlpack("X", [1, 2, 3])
    with pytest.raises(TritonModelException, match="not supported"):
        Tensor.from_dlpack("X", np.zeros(2, np.complex64))

    readonly = np.zeros(3)
    readonly.flags.writeable = False
    with pytest.raises(TritonModelException, match="'R'.*__dlpack__"):
        Tensor.from_dlpack("R", readonly)

    class GpuLike:
        def __dlpack__(self, stream=None):
            raise AssertionError("must not be called")

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(TritonModelException, match="device type 2"):
        Tensor.from_dlpack("G", GpuLike())


# ------------------------------------------------------------------ BF16


def test_bf16_dlpack_roundtrip():
    bits = np.array([0x3F80, 0x4000, 0xC040, 0x0000], dtype="<u2")  # 1, 2, -3, 0
    raw = bytearray(bits.tobytes())
    t = Tensor._from_wire("H", 14, (2, 2), memoryview(raw))
    cap = t.to_dlpack()
    dl = capsule_tensor(cap)
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (4, 16, 1)
    assert dl.ndim == 2 and [dl.shape[0], dl.shape[1]] == [2, 2]
    back = Tensor.from_dlpack("H2", cap)
    assert back.triton_dtype() == 14 and back.shape() == [2, 2]
    with pytest.raises(TritonModelException, match="BF16"):
        back.as_numpy()
    name, dtype, dims, buf = back._to_wire()
    assert (dtype, dims) == (14, (2, 2))
    assert bytes(memoryview(buf).cast("B")) == bytes(raw)
    # Zero-copy all the way: the consumer sees writes to the wire buffer.
    raw[0:2] = b"\x00\x00"
    assert bytes(memoryview(back._to_wire()[3]).cast("B"))[:2] == b"\x00\x00"


def test_ml_dtypes_bfloat16_array_is_a_bf16_tensor():
    import ml_dtypes

    arr = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, 7.5]], ml_dtypes.bfloat16)
    for t in (Tensor("M", arr), Tensor.from_dlpack("M", arr)):
        assert t.triton_dtype() == 14 and t.shape() == [2, 3]
        cap = t.to_dlpack()
        dl = capsule_tensor(cap)
        assert (dl.dtype.code, dl.dtype.bits) == (4, 16)
        assert dl.data == arr.ctypes.data  # zero-copy
        assert bytes(memoryview(t._to_wire()[3]).cast("B")) == arr.tobytes()
        with pytest.raises(TritonModelException, match="BF16"):
            t.as_numpy()
    # Strided: shared until it goes on the wire, then dense.
    t = Tensor.from_dlpack("S", arr[:, ::2])
    assert t.shape() == [2, 2]
    assert bytes(memoryview(t._to_wire()[3]).cast("B")) == arr[:, ::2].tobytes()
