# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Send matrices to the jax model and check its answer against NumPy.

    python examples/jax/client.py [--grpc localhost:8001]

Exits non-zero if an answer is wrong.
"""

import argparse
import sys

import numpy as np
import tritonclient.grpc as grpcclient


def expected(x):
    z = (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
    return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpc", default="localhost:8001")
    args = parser.parse_args()

    client = grpcclient.InferenceServerClient(args.grpc)
    rng = np.random.default_rng(3)
    ok = True
    # The last one is large enough to travel through shared memory.
    for shape in [(2, 8), (4, 16), (2, 8), (64, 1024)]:
        x = rng.normal(2.0, 3.0, size=shape).astype(np.float32)
        inp = grpcclient.InferInput("X", list(shape), "FP32")
        inp.set_data_from_numpy(x)
        y = client.infer("jax", [inp]).as_numpy("Y")
        right = y.shape == shape and np.allclose(y, expected(x.astype(np.float64)), atol=1e-4)
        ok &= right
        print(f"jax normalise+gelu on {shape}: mean {y.mean():.4f}  {'ok' if right else 'WRONG'}")
    client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
