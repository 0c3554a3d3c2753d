# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Show the configs the auto_complete models completed, then ask both.

    python examples/auto_complete/client.py [--http localhost:8000]

Exits non-zero if a config lacks what the model declared or an answer is wrong.
"""

import argparse
import sys

import numpy as np
import tritonclient.http as httpclient


def tensors(config, section):
    return {t["name"]: (t["data_type"], [int(d) for d in t["dims"]]) for t in config[section]}


def check_batch(client):
    config = client.get_model_config("auto_complete_batch")
    declared = (
        config["max_batch_size"] == 16
        and "dynamic_batching" in config
        and tensors(config, "input") == {"A": ("TYPE_FP32", [3]), "B": ("TYPE_FP32", [3])}
        and tensors(config, "output") == {"DOT": ("TYPE_FP32", [1]), "MAX": ("TYPE_FP32", [3])}
    )
    print(
        f"auto_complete_batch config: max_batch_size {config['max_batch_size']}, "
        f"inputs {sorted(tensors(config, 'input'))}, outputs {sorted(tensors(config, 'output'))}"
        f"  {'ok' if declared else 'WRONG'}"
    )
    rng = np.random.default_rng(11)
    a = rng.normal(size=(4, 3)).astype(np.float32)  # four rows in one request
    b = rng.normal(size=(4, 3)).astype(np.float32)
    inputs = [
        httpclient.InferInput("A", [4, 3], "FP32"),
        httpclient.InferInput("B", [4, 3], "FP32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("auto_complete_batch", inputs)
    dot, top = result.as_numpy("DOT"), result.as_numpy("MAX")
    right = np.allclose(dot[:, 0], (a * b).sum(axis=1), atol=1e-5) and np.array_equal(
        top, np.maximum(a, b)
    )
    print(
        f"auto_complete_batch: dot products {np.round(dot[:, 0], 3)}  {'ok' if right else 'WRONG'}"
    )
    return declared and right


def check_nobatch(client):
    config = client.get_model_config("auto_complete_nobatch")
    declared = (
        config["backend"] == "python"
        and config["max_batch_size"] == 0
        and tensors(config, "input") == {"WORDS": ("TYPE_STRING", [-1])}
    )
    print(
        f"auto_complete_nobatch config (no config.pbtxt): backend {config['backend']!r}, "
        f"inputs {sorted(tensors(config, 'input'))}, outputs {sorted(tensors(config, 'output'))}"
        f"  {'ok' if declared else 'WRONG'}"
    )
    words = np.array([b"triton", b"auto", b"complete"], dtype=object)
    inp = httpclient.InferInput("WORDS", [3], "BYTES")
    inp.set_data_from_numpy(words)
    result = client.infer("auto_complete_nobatch", [inp])
    upper = [w.decode() for w in result.as_numpy("UPPER")]
    lengths = result.as_numpy("LENGTHS").tolist()
    right = upper == ["TRITON", "AUTO", "COMPLETE"] and lengths == [6, 4, 8]
    print(f"auto_complete_nobatch: {upper} {lengths}  {'ok' if right else 'WRONG'}")
    return declared and right


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", default="localhost:8000")
    args = parser.parse_args()
    client = httpclient.InferenceServerClient(args.http)
    try:
        ok = check_batch(client)
        ok &= check_nobatch(client)
    finally:
        client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
