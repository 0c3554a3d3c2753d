# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Send text rows to the preprocessing ensemble (iris_preprocess, then
iris_classify) and check the species it names.

    python examples/preprocessing/client.py [--http localhost:8000]

Exits non-zero if an answer is wrong.
"""

import argparse
import sys

import numpy as np
import tritonclient.http as httpclient

# Measurements of flowers from the iris data set, with their species.
SAMPLES = [
    ("5.1, 3.5, 1.4, 0.2", "setosa"),
    ("4.9,3.0,1.4,0.2", "setosa"),
    ("5.7, 2.8, 4.1, 1.3", "versicolor"),
    ("5.5; 2.4; 3.8; 1.1", "versicolor"),
    ("6.3, 3.3, 6.0, 2.5", "virginica"),
    ("7.7, 3.0, 6.1, 2.3", "virginica"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", default="localhost:8000")
    args = parser.parse_args()

    client = httpclient.InferenceServerClient(args.http)
    rows = np.array([text.encode() for text, _ in SAMPLES], dtype=object)
    inp = httpclient.InferInput("ROWS", [len(rows)], "BYTES")
    inp.set_data_from_numpy(rows)
    result = client.infer("preprocessing", [inp])
    labels = [v.decode() for v in result.as_numpy("LABEL")]
    distances = result.as_numpy("DISTANCE")
    ok = True
    for (text, species), label, dist in zip(SAMPLES, labels, distances, strict=True):
        right = label == species and 0 <= dist < 2
        ok &= right
        print(f"{text!r:24} -> {label:10} (distance {dist:.2f})  {'ok' if right else 'WRONG'}")
    client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
