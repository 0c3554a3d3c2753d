# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""mock_llm: streams "tokens" like a language model would, from an
``async def execute``: one instance carries hundreds of streams at once.

Inputs: PROMPT (a string), MAX_TOKENS (how many tokens), optional
TOKEN_DELAY_MS (the pretend cost of a token). Each token is a response with
TEXT (the token) and INDEX; a cancelled stream stops at once.
"""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _scalar(request, name, default):
    t = pb_utils.get_input_tensor_by_name(request, name)
    return default if t is None else t.as_numpy().reshape(-1)[0]


class TritonPythonModel:
    async def execute(self, requests):
        # One coroutine per request: a batch never waits for its slowest member.
        await asyncio.gather(*(self._stream(r) for r in requests))

    async def _stream(self, request):
        prompt = _scalar(request, "PROMPT", b"")
        words = (
            prompt.decode(errors="replace") if isinstance(prompt, bytes) else str(prompt)
        ).split() or ["token"]
        count = int(_scalar(request, "MAX_TOKENS", 16))
        delay = float(_scalar(request, "TOKEN_DELAY_MS", 0)) / 1000
        sender = request.get_response_sender()
        for i in range(count):
            if delay:
                await asyncio.sleep(delay)
            else:
                await asyncio.sleep(0)  # let the other streams run
            token = words[i % len(words)]
            sender.send(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("TEXT", np.array([token.encode()], dtype=object)),
                        pb_utils.Tensor("INDEX", np.array([i], np.int32)),
                    ],
                    parameters={"index": i},
                )
            )
        sender.send(flags=FINAL)
