# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Stream text from the llm model, over HTTP (Server-Sent Events from
/v2/models/llm/generate_stream) or gRPC (a bidirectional stream), and check
each streamed text against the whole answer of one non-streaming request.

    python examples/llm/client.py [--http localhost:8000 | --grpc localhost:8001]
        [--prompt TEXT] [--max-tokens 32]
"""

import argparse
import asyncio
import http.client
import json
import sys

import numpy as np
import tritonclient.grpc.aio as aioclient

PROMPTS = ["Once upon a time", "The quick brown fox", "tritonpy streams"]


def http_generate(url, prompt, max_tokens, stream):
    """The text pieces of one /generate (stream=False: one piece) or
    /generate_stream request, printed as they come."""
    conn = http.client.HTTPConnection(url, timeout=120)
    body = json.dumps({"text_input": prompt, "max_tokens": max_tokens, "stream": stream})
    path = "/v2/models/llm/generate" + ("_stream" if stream else "")
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"{path}: HTTP {resp.status}: {resp.read().decode()}")
    pieces = []
    try:
        if not stream:
            return [json.loads(resp.read())["text_output"]]
        for line in resp:  # one "data: {json}" line per response, then a blank one
            if not line.startswith(b"data:"):
                continue
            event = json.loads(line[5:])
            if "error" in event:
                raise RuntimeError(event["error"])
            if "text_output" in event:
                pieces.append(event["text_output"])
                print(event["text_output"], end="", flush=True)
        return pieces
    finally:
        conn.close()


def grpc_request(prompt, max_tokens, stream):
    inputs = [
        aioclient.InferInput("text_input", [1], "BYTES"),
        aioclient.InferInput("max_tokens", [1], "INT32"),
        aioclient.InferInput("stream", [1], "BOOL"),
    ]
    inputs[0].set_data_from_numpy(np.array([prompt.encode()], dtype=object))
    inputs[1].set_data_from_numpy(np.array([max_tokens], np.int32))
    inputs[2].set_data_from_numpy(np.array([stream], bool))
    return {"model_name": "llm", "inputs": inputs, "enable_empty_final_response": True}


async def grpc_generate(url, prompt, max_tokens, stream):
    async def requests():
        yield grpc_request(prompt, max_tokens, stream)

    pieces = []
    async with aioclient.InferenceServerClient(url) as client:
        async for result, error in client.stream_infer(requests()):
            if error is not None:
                raise RuntimeError(error)
            out = result.as_numpy("text_output")
            if out is not None:
                piece = b"".join(out.reshape(-1)).decode()
                pieces.append(piece)
                if stream:
                    print(piece, end="", flush=True)
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
    return pieces


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--http", default=None)
    where.add_argument("--grpc", default=None)
    parser.add_argument("--prompt", action="append", help="a prompt (repeatable)")
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    if args.grpc:

        def generate(prompt, stream):
            return asyncio.run(grpc_generate(args.grpc, prompt, args.max_tokens, stream))

    else:

        def generate(prompt, stream):
            return http_generate(args.http or "localhost:8000", prompt, args.max_tokens, stream)

    ok = True
    for prompt in args.prompt or PROMPTS:
        print(f"{prompt!r} -> ", end="", flush=True)
        pieces = generate(prompt, True)
        (whole,) = generate(prompt, False)
        # One piece per token, and together the non-streamed answer.
        good = "".join(pieces) == whole and len(pieces) == len(whole) == args.max_tokens
        ok &= good
        print(f"  ({len(pieces)} tokens): {'ok' if good else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
