# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Ask the render model for test images and check every pixel.

python examples/render/client.py [--http localhost:8000 | --grpc localhost:8001]
"""

import argparse
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


def expected(height, width):
    rows = np.linspace(0.0, 127.5, height, dtype=np.float32)[:, None]
    cols = np.linspace(0.0, 127.5, width, dtype=np.float32)[None, :]
    return (rows + cols).astype(np.uint8)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--http", default=None)
    where.add_argument("--grpc", default=None)
    args = parser.parse_args()
    if args.grpc:
        mod, client = grpcclient, grpcclient.InferenceServerClient(args.grpc)
    else:
        mod, client = httpclient, httpclient.InferenceServerClient(args.http or "localhost:8000")
    ok = True
    # A small image, a 4K one (8 MiB) and an empty one.
    for height, width in ((3, 5), (2160, 3840), (0, 7)):
        size = mod.InferInput("SIZE", [2], "INT32")
        size.set_data_from_numpy(np.array([height, width], np.int32))
        out = (
            [httpclient.InferRequestedOutput("IMAGE", binary_data=True)]
            if mod is httpclient
            else None
        )
        image = client.infer("render", [size], outputs=out).as_numpy("IMAGE")
        right = image.shape == (height, width) and np.array_equal(image, expected(height, width))
        ok &= right
        print(f"{height}x{width}: {'ok' if right else 'WRONG'}")
    # A size the model refuses comes back as an error naming the request.
    size = mod.InferInput("SIZE", [2], "INT32")
    size.set_data_from_numpy(np.array([-1, 4], np.int32))
    try:
        client.infer("render", [size], request_id="too-small")
        print("-1x4: WRONG (no error)")
        ok = False
    except InferenceServerException as exc:
        right = "too-small" in str(exc) and "-1x4" in str(exc)
        ok &= right
        print(f"-1x4: {'ok' if right else 'WRONG'} ({exc.message()})")
    client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
