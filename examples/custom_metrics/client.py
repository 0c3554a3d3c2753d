# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Send a few requests to the custom_metrics model, then print its metric
lines from Triton's metrics endpoint.

    python examples/custom_metrics/client.py [--http localhost:8000] [--metrics localhost:8002]

Exits non-zero if an answer is wrong or the metrics are missing.
"""

import argparse
import sys
import urllib.request

import numpy as np
import tritonclient.http as httpclient


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", default="localhost:8000")
    parser.add_argument("--metrics", default="localhost:8002")
    parser.add_argument("--requests", type=int, default=5)
    args = parser.parse_args()

    client = httpclient.InferenceServerClient(args.http)
    ok = True
    for n in range(1, args.requests + 1):
        x = np.arange(n, dtype=np.float32)
        inp = httpclient.InferInput("INPUT0", [n], "FP32")
        inp.set_data_from_numpy(x)
        got = client.infer("custom_metrics", [inp]).as_numpy("OUTPUT0")
        ok &= bool(np.array_equal(got, x * 2))
    client.close()

    with urllib.request.urlopen(f"http://{args.metrics}/metrics", timeout=10) as r:
        text = r.read().decode()
    lines = [ln for ln in text.splitlines() if ln.startswith("custom_metrics_")]
    print("\n".join(lines))
    ok &= any(ln.startswith("custom_metrics_requests_total{") for ln in lines)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
