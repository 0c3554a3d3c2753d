# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Classify a few feature rows with the pytorch model and check the
probabilities against NumPy, computed from the same weights.json.

    python examples/pytorch/client.py [--http localhost:8000]

Exits non-zero if an answer is wrong.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient


def expected(rows):
    params = json.loads((Path(__file__).parent / "weights.json").read_text())
    logits = rows @ np.array(params["weight"]).T + np.array(params["bias"])
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", default="localhost:8000")
    args = parser.parse_args()

    client = httpclient.InferenceServerClient(args.http, concurrency=4)
    rng = np.random.default_rng(5)
    batches = [rng.normal(size=(n, 4)).astype(np.float32) for n in (1, 3, 8, 2)]
    # Sent at once, so that the dynamic batcher may merge them.
    pending = []
    for rows in batches:
        inp = httpclient.InferInput("FEATURES", list(rows.shape), "FP32")
        inp.set_data_from_numpy(rows)
        pending.append(client.async_infer("pytorch", [inp]))
    ok = True
    for rows, job in zip(batches, pending, strict=True):
        probs = job.get_result().as_numpy("PROBS")
        right = probs.shape == (len(rows), 3) and np.allclose(probs, expected(rows), atol=1e-5)
        ok &= right
        print(
            f"{len(rows)} rows -> classes {probs.argmax(axis=1).tolist()}, "
            f"top probability {[round(float(p), 3) for p in probs.max(axis=1)]}  "
            f"{'ok' if right else 'WRONG'}"
        )
    client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
