# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Open several streams to bls_decoupled over gRPC and check that step k
of each answers k * X.

    python examples/bls_decoupled/client.py [--grpc localhost:8001] [STEPS ...]

Exits non-zero if an answer is wrong.
"""

import argparse
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpc", default="localhost:8001")
    parser.add_argument("steps", nargs="*", type=int, default=[4, 1, 6])
    args = parser.parse_args()

    results = queue.Queue()
    client = grpcclient.InferenceServerClient(args.grpc)
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    rng = np.random.default_rng(23)
    xs = {}
    for i, n in enumerate(args.steps):
        x = rng.integers(-9, 10, 4).astype(np.float32)
        xs[str(i)] = x
        inputs = [
            grpcclient.InferInput("X", [4], "FP32"),
            grpcclient.InferInput("STEPS", [1], "INT32"),
        ]
        inputs[0].set_data_from_numpy(x)
        inputs[1].set_data_from_numpy(np.array([n], np.int32))
        client.async_stream_infer(
            "bls_decoupled", inputs, request_id=str(i), enable_empty_final_response=True
        )
    got = {rid: [] for rid in xs}
    open_streams = len(xs)
    while open_streams:
        result, error = results.get(timeout=60)
        if error is not None:
            print("error:", error)
            return 1
        response = result.get_response()
        if response.outputs:
            got[response.id].append((int(result.as_numpy("STEP")[0]), result.as_numpy("SUM")))
        if response.parameters["triton_final_response"].bool_param:
            open_streams -= 1
    client.stop_stream()
    client.close()
    ok = True
    for i, n in enumerate(args.steps):
        rid = str(i)
        right = [k for k, _ in got[rid]] == list(range(1, n + 1)) and all(
            np.array_equal(s, k * xs[rid]) for k, s in got[rid]
        )
        ok &= right
        last = got[rid][-1][1] if got[rid] else None
        print(
            f"{n} steps of X = {xs[rid]} -> {len(got[rid])} responses, last {last}  "
            f"{'ok' if right else 'WRONG'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
