# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Ask the add_sub model for sums and differences, over HTTP and gRPC.

    python examples/add_sub/client.py [--http localhost:8000] [--grpc localhost:8001]

Exits non-zero if any answer is wrong.
"""

import argparse
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient


def ask(module, url, model, x, y):
    client = module.InferenceServerClient(url)
    inputs = [
        module.InferInput("INPUT0", list(x.shape), "FP32"),
        module.InferInput("INPUT1", list(y.shape), "FP32"),
    ]
    inputs[0].set_data_from_numpy(x)
    inputs[1].set_data_from_numpy(y)
    outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
    result = client.infer(model, inputs, outputs=outputs)
    return result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", default="localhost:8000")
    parser.add_argument("--grpc", default="localhost:8001")
    parser.add_argument("--model", default="add_sub")
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    x = rng.random(4, dtype=np.float32)
    y = rng.random(4, dtype=np.float32)
    ok = True
    for proto, module, url in (("HTTP", httpclient, args.http), ("gRPC", grpcclient, args.grpc)):
        total, gap = ask(module, url, args.model, x, y)
        right = np.allclose(total, x + y) and np.allclose(gap, x - y)
        ok &= right
        print(f"{proto}: {x} + {y} = {total}")
        print(f"{proto}: {x} - {y} = {gap}  {'ok' if right else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
