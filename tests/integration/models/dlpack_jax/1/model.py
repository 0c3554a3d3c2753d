# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Inputs into JAX and results out, through DLPack: Y = X * X + 1 by a
jitted function, B1 = B + 1 in bfloat16. SHARED says whether JAX saw the
input's memory without a copy (XLA on CPU borrows only 64-byte aligned
memory: inputs in shared-memory arenas are, small inline ones may not be)
and whether the output tensor holds JAX's memory."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402


@jax.jit
def square_plus_one(x):
    return x * x + 1


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x_in = pb_utils.get_input_tensor_by_name(request, "X")
            x = jnp.from_dlpack(x_in)
            y = square_plus_one(x)
            y_out = pb_utils.Tensor.from_dlpack("Y", y)
            shared = [
                x.unsafe_buffer_pointer() == x_in.as_numpy().ctypes.data,
                y_out.as_numpy().ctypes.data == y.unsafe_buffer_pointer(),
            ]
            outputs = [y_out, pb_utils.Tensor("SHARED", np.array(shared))]
            b_in = pb_utils.get_input_tensor_by_name(request, "B")
            if b_in is not None:
                b = jax.dlpack.from_dlpack(b_in)
                assert b.dtype == jnp.bfloat16, b.dtype
                outputs.append(pb_utils.Tensor.from_dlpack("B1", b + 1))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
