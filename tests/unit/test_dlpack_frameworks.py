# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""pb_utils.Tensor and DLPack with PyTorch and JAX (CPU), outside the server:
zero-copy both ways (checked on data pointers), BF16, strided producers,
lifetimes and refusals. `make setup` installs both frameworks."""

from __future__ import annotations

import gc
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.utils.dlpack  # noqa: E402

from tritonpy.pb_utils import Tensor, TritonModelException  # noqa: E402

TYPE_BF16 = 14

TORCH_TYPES = {
    torch.bool: 1,
    torch.uint8: 2,
    torch.int8: 6,
    torch.int16: 7,
    torch.int32: 8,
    torch.int64: 9,
    torch.float16: 10,
    torch.float32: 11,
    torch.float64: 12,
    torch.bfloat16: TYPE_BF16,
}


def aligned(arr: np.ndarray, align: int = 64) -> np.ndarray:
    """A copy of ``arr`` whose data starts on an ``align``-byte boundary."""
    raw = np.empty(arr.nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    out = raw[start : start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    out[...] = arr
    return out


def wire_bytes(t: Tensor) -> bytes:
    return bytes(memoryview(t._to_wire()[3]).cast("B"))


def pointer(t: Tensor) -> int:
    """Address of the first byte of a tensor's data (BF16 included)."""
    return t._fixed_array().ctypes.data


# ------------------------------------------------------------------ torch


@pytest.mark.parametrize("dtype", list(TORCH_TYPES), ids=str)
def test_torch_to_tensor_and_back_zero_copy(dtype):
    src = (torch.arange(12) % 5).to(dtype).reshape(3, 4)
    t = Tensor.from_dlpack("T", src)
    assert t.triton_dtype() == TORCH_TYPES[dtype] and t.shape() == [3, 4]
    assert pointer(t) == src.data_ptr()
    back = torch.from_dlpack(t)
    assert back.dtype == dtype and back.data_ptr() == src.data_ptr()
    assert torch.equal(back, src)
    # The bytes the stub would send are exactly torch's.
    assert wire_bytes(t) == src.view(-1).view(torch.uint8).numpy().tobytes()


def test_wire_input_to_torch_is_a_view():
    raw = bytearray(np.arange(6, dtype=np.float32).tobytes())
    t = Tensor._from_wire("IN", 11, (2, 3), memoryview(raw))
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t.as_numpy().ctypes.data
    raw[0:4] = np.float32(42).tobytes()
    assert x[0, 0].item() == 42.0
    y = torch.utils.dlpack.from_dlpack(t.to_dlpack())
    assert y.data_ptr() == x.data_ptr()


def test_torch_capsule_and_writes_through():
    src = torch.zeros(5, dtype=torch.float64)
    t = Tensor.from_dlpack("C", torch.utils.dlpack.to_dlpack(src))
    src[2] = 7.0
    assert t.as_numpy().tolist() == [0, 0, 7, 0, 0]


@pytest.mark.parametrize("view", ["transpose", "step", "slice", "expand", "permute"])
def test_torch_non_contiguous_into_from_dlpack(view):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    src = {
        "transpose": lambda: base.T,
        "step": lambda: base[:, ::2],
        "slice": lambda: base[1:3, 2:5],
        "expand": lambda: torch.arange(3, dtype=torch.float32).expand(4, 3),
        "permute": lambda: base.reshape(2, 3, 4).permute(2, 0, 1),
    }[view]()
    assert not src.is_contiguous()
    t = Tensor.from_dlpack("NC", src)
    assert t.shape() == list(src.shape)
    arr = t.as_numpy()
    np.testing.assert_array_equal(arr, src.numpy())
    assert np.shares_memory(arr, src.numpy())  # a strided view, no copy yet
    # As an output: dense row-major bytes of the logical tensor.
    assert wire_bytes(t) == src.contiguous().numpy().tobytes()
    # And out again as a dense tensor.
    assert torch.equal(torch.from_dlpack(t), src)


def test_torch_bf16_values_round_trip_through_triton_bf16():
    src = torch.tensor([1.0, -2.5, 0.15625, 3.0e38, -0.0], dtype=torch.bfloat16)
    t = Tensor.from_dlpack("B", src)
    assert t.triton_dtype() == TYPE_BF16
    with pytest.raises(TritonModelException, match="BF16"):
        t.as_numpy()
    # What the client gets back: BF16 bits, which ml_dtypes reads.
    seen = np.frombuffer(wire_bytes(t), dtype=ml_dtypes.bfloat16)
    assert seen.astype(np.float32).tolist() == src.float().tolist()
    # A BF16 wire input seen by torch, without a copy.
    raw = bytearray(np.array([0.5, 4.0], ml_dtypes.bfloat16).tobytes())
    wire = Tensor._from_wire("IN", TYPE_BF16, (2,), memoryview(raw))
    x = torch.from_dlpack(wire)
    assert x.dtype == torch.bfloat16 and x.tolist() == [0.5, 4.0]
    assert x.data_ptr() == pointer(wire)


def test_numpy_bfloat16_tensor_to_torch():
    arr = np.array([[1.0, 2.0], [-3.0, 0.25]], ml_dtypes.bfloat16)
    t = Tensor("M", arr)
    x = torch.from_dlpack(t)
    assert x.dtype == torch.bfloat16 and x.data_ptr() == arr.ctypes.data
    assert x.float().tolist() == [[1.0, 2.0], [-3.0, 0.25]]


def test_torch_tensor_outlives_its_producer():
    src = torch.arange(1000, dtype=torch.int32) * 3
    t = Tensor.from_dlpack("K", src)
    del src
    gc.collect()
    assert t.as_numpy()[999] == 2997
    assert wire_bytes(t) == (np.arange(1000, dtype=np.int32) * 3).tobytes()


def test_torch_refusals_name_the_tensor():
    with pytest.raises(TritonModelException, match="'G'.*__dlpack__"):
        Tensor.from_dlpack("G", torch.ones(2, requires_grad=True))
    with pytest.raises(TritonModelException, match="'Z'.*not supported"):
        Tensor.from_dlpack("Z", torch.ones(2, dtype=torch.complex64))
    with pytest.raises(TritonModelException, match="string tensors"):
        torch.from_dlpack(Tensor("S", np.array([b"x"], dtype=object)))


# ------------------------------------------------------------------ jax


def test_jax_reads_tensor_without_copy_when_aligned():
    # XLA's CPU client borrows only 64-byte aligned memory (and copies
    # otherwise); tritonpy's shared-memory arenas are 64-byte aligned.
    arr = aligned(np.arange(12, dtype=np.float32).reshape(3, 4))
    t = Tensor("A", arr)
    for convert in (jnp.from_dlpack, jax.dlpack.from_dlpack):
        x = convert(t)
        assert x.unsafe_buffer_pointer() == arr.ctypes.data
        np.testing.assert_array_equal(np.asarray(x), arr)


def test_jax_copies_unaligned_memory_but_values_hold():
    arr = aligned(np.arange(5, dtype=np.float32), 64)[1:]  # 4 bytes past the boundary
    t = Tensor("U", arr)
    x = jnp.from_dlpack(t)
    assert x.unsafe_buffer_pointer() != arr.ctypes.data
    np.testing.assert_array_equal(np.asarray(x), arr)


def test_jax_array_into_tensor_zero_copy():
    f = jax.jit(lambda v: jnp.tanh(v) * 2)
    y = f(jnp.linspace(-1, 1, 8, dtype=jnp.float32))
    t = Tensor.from_dlpack("Y", y)
    assert t.triton_dtype() == 11 and pointer(t) == y.unsafe_buffer_pointer()
    np.testing.assert_allclose(t.as_numpy(), np.tanh(np.linspace(-1, 1, 8)) * 2, rtol=1e-6)


def test_jax_bf16_both_ways():
    y = jnp.array([1.5, -2.0, 8.0], dtype=jnp.bfloat16)
    t = Tensor.from_dlpack("B", y)
    assert t.triton_dtype() == TYPE_BF16 and pointer(t) == y.unsafe_buffer_pointer()
    back = jnp.from_dlpack(t)
    assert back.dtype == jnp.bfloat16 and back.unsafe_buffer_pointer() == pointer(t)
    # jax hands BF16 to numpy as ml_dtypes.bfloat16.
    assert np.asarray(back).dtype == ml_dtypes.bfloat16
    assert np.asarray(back).astype(np.float32).tolist() == [1.5, -2.0, 8.0]


def test_jax_transposed_into_from_dlpack():
    y = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3).T
    t = Tensor.from_dlpack("T", y)
    np.testing.assert_array_equal(t.as_numpy(), np.arange(6.0).reshape(2, 3).T)
    assert (
        wire_bytes(t)
        == np.ascontiguousarray(np.arange(6.0, dtype=np.float32).reshape(2, 3).T).tobytes()
    )


# ------------------------------------------------------------------ torch <-> jax


def test_torch_to_jax_through_a_tensor():
    src = torch.from_numpy(aligned(np.arange(16, dtype=np.float32)))
    t = Tensor.from_dlpack("X", src)
    x = jnp.from_dlpack(t)
    assert x.unsafe_buffer_pointer() == src.data_ptr()
    assert float(jnp.sum(x)) == 120.0
