# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Stream tokens from mock_llm over gRPC (tritonclient's asyncio client),
many streams at once, and check every stream got every token in order.

    python examples/mock_llm/client.py [--grpc localhost:8001] [--streams 32] [--tokens 20]
"""

import argparse
import asyncio
import sys
import time

import numpy as np
import tritonclient.grpc.aio as aioclient


def request(prompt, tokens, delay_ms, rid):
    inputs = [
        aioclient.InferInput("PROMPT", [1], "BYTES"),
        aioclient.InferInput("MAX_TOKENS", [1], "INT32"),
        aioclient.InferInput("TOKEN_DELAY_MS", [1], "FP32"),
    ]
    inputs[0].set_data_from_numpy(np.array([prompt.encode()], dtype=object))
    inputs[1].set_data_from_numpy(np.array([tokens], np.int32))
    inputs[2].set_data_from_numpy(np.array([delay_ms], np.float32))
    return {"model_name": "mock_llm", "inputs": inputs, "request_id": rid}


async def one_stream(client, i, tokens, delay_ms):
    async def requests():
        yield request(f"stream {i} says hello", tokens, delay_ms, str(i))

    got = []
    async for result, error in client.stream_infer(requests()):
        if error is not None:
            raise RuntimeError(error)
        got.append(int(result.as_numpy("INDEX")[0]))
        if len(got) == tokens:
            break
    return got


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpc", default="localhost:8001")
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=5.0)
    args = parser.parse_args()
    async with aioclient.InferenceServerClient(args.grpc) as client:
        start = time.monotonic()
        results = await asyncio.gather(
            *(one_stream(client, i, args.tokens, args.delay_ms) for i in range(args.streams))
        )
        elapsed = time.monotonic() - start
    ok = all(r == list(range(args.tokens)) for r in results)
    total = args.streams * args.tokens
    print(
        f"{args.streams} streams x {args.tokens} tokens in {elapsed:.2f} s "
        f"({total / elapsed:.0f} tokens/s): {'ok' if ok else 'WRONG'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
