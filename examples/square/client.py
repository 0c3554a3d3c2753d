# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Stream requests to the square model over gRPC and check every answer.

python examples/square/client.py [--grpc localhost:8001] [N ...]
"""

import argparse
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpc", default="localhost:8001")
    parser.add_argument("counts", nargs="*", type=int, default=[3, 0, 5])
    args = parser.parse_args()

    results = queue.Queue()
    client = grpcclient.InferenceServerClient(args.grpc)
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    for i, n in enumerate(args.counts):
        inp = grpcclient.InferInput("IN", [1], "INT32")
        inp.set_data_from_numpy(np.array([n], np.int32))
        # Ask Triton to tell us when a request is over, even with no response.
        client.async_stream_infer(
            "square", [inp], request_id=str(i), enable_empty_final_response=True
        )
    got = {str(i): [] for i in range(len(args.counts))}
    open_requests = len(args.counts)
    while open_requests:
        result, error = results.get(timeout=30)
        if error is not None:
            print("error:", error)
            return 1
        response = result.get_response()
        rid = response.id
        if response.outputs:
            got[rid].append(int(result.as_numpy("OUT")[0]))
        if response.parameters["triton_final_response"].bool_param:
            open_requests -= 1
    client.stop_stream()
    client.close()
    ok = True
    for i, n in enumerate(args.counts):
        right = got[str(i)] == [n] * n
        ok &= right
        print(f"square({n}) -> {got[str(i)]} {'ok' if right else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
