# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""jax: a jitted JAX function on the CPU. Each row of X is normalised
(zero mean, unit variance) and passed through GELU (tanh form).

The input goes into JAX with ``jnp.from_dlpack`` and the result comes out
with ``pb_utils.Tensor.from_dlpack``. XLA on the CPU borrows the input's
memory only when it is 64-byte aligned, which inputs held in tritonpy's
shared-memory arenas are; small inputs that travel inside the message may
be copied. ``jax.jit`` compiles once per input shape.
"""

import os

# The CPU is all there is here; skip the probing for accelerators.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402


@jax.jit
def normalise_gelu(x):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    z = (x - mean) * jax.lax.rsqrt(var + 1e-5)
    return jax.nn.gelu(z, approximate=True)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = jnp.from_dlpack(pb_utils.get_input_tensor_by_name(request, "X"))
            y = normalise_gelu(x)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack("Y", y)]))
        return responses
