# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Ask the bls model (which asks add_sub) for sums and differences.

    python examples/bls/client.py [--http localhost:8000]

Exits non-zero if an answer is wrong.
"""

import argparse
import sys

import numpy as np
import tritonclient.http as httpclient


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", default="localhost:8000")
    args = parser.parse_args()

    client = httpclient.InferenceServerClient(args.http)
    rng = np.random.default_rng(11)
    ok = True
    for _ in range(3):
        x = rng.random(4, dtype=np.float32)
        y = rng.random(4, dtype=np.float32)
        inputs = [
            httpclient.InferInput("INPUT0", [4], "FP32"),
            httpclient.InferInput("INPUT1", [4], "FP32"),
        ]
        inputs[0].set_data_from_numpy(x)
        inputs[1].set_data_from_numpy(y)
        result = client.infer("bls", inputs)
        total, gap = result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")
        right = np.allclose(total, x + y) and np.allclose(gap, x - y)
        ok &= right
        print(
            f"bls -> add_sub: {x} + {y} = {total}; difference {gap}  {'ok' if right else 'WRONG'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
