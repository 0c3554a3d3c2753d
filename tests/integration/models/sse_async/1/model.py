# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""sse_sync's streams from an ``async def execute`` that yields to the loop
after each token (MODE 0 and 1), or from a worker thread of the loop's
executor that it awaits (MODE 2: the sender used from another thread while
the coroutine waits, separate FINAL)."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def scalar(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0])


def response(ident, i):
    return pb_utils.InferenceResponse(
        [
            pb_utils.Tensor("ID", np.array([ident], np.int32)),
            pb_utils.Tensor("TOKEN", np.array([i], np.int32)),
        ]
    )


def from_thread(sender, ident, n):
    for i in range(n):
        sender.send(response(ident, i))
    sender.send(flags=FINAL)


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.gather(*(self.stream(r) for r in requests))

    async def stream(self, request):
        ident, n, mode = (scalar(request, k) for k in ("ID", "N", "MODE"))
        sender = request.get_response_sender()
        if mode == 2:
            await asyncio.get_running_loop().run_in_executor(None, from_thread, sender, ident, n)
            return
        for i in range(n):
            last = i == n - 1 and mode == 0
            sender.send(response(ident, i), flags=FINAL if last else 0)
            await asyncio.sleep(0)  # the other streams' turn
        if mode == 1 or n <= 0:
            sender.send(flags=FINAL)
