# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Send many requests at once to bls_async (which asks add_sub) and check
each answer is x*x - y*y.

    python examples/bls_async/client.py [--http localhost:8000] [--requests 32]

Exits non-zero if an answer is wrong.
"""

import argparse
import sys

import numpy as np
import tritonclient.http as httpclient


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", default="localhost:8000")
    parser.add_argument("--requests", type=int, default=32)
    args = parser.parse_args()

    client = httpclient.InferenceServerClient(args.http, concurrency=args.requests)
    rng = np.random.default_rng(17)
    sent = []
    for _ in range(args.requests):
        x = rng.random(4, dtype=np.float32)
        y = rng.random(4, dtype=np.float32)
        inputs = [
            httpclient.InferInput("INPUT0", [4], "FP32"),
            httpclient.InferInput("INPUT1", [4], "FP32"),
        ]
        inputs[0].set_data_from_numpy(x)
        inputs[1].set_data_from_numpy(y)
        sent.append((x, y, client.async_infer("bls_async", inputs)))
    wrong = 0
    for x, y, job in sent:
        if not np.allclose(job.get_result().as_numpy("OUTPUT0"), x * x - y * y, atol=1e-6):
            wrong += 1
    client.close()
    print(
        f"bls_async -> add_sub: {args.requests - wrong} of {args.requests} answers "
        f"{'ok' if not wrong else 'WRONG'}"
    )
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
