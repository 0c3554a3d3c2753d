# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A decoupled model for cancellation tests. For IN = k it sends k
responses (OUT = 1 .. k), then waits up to 60 s for its request to be
cancelled. Cancelled, it logs "stream_until_cancelled: request '<id>' saw
the cancellation after k responses" and ends with the final flag alone;
never cancelled, it sends k more responses first, so a caller that counts
them sees that the cancellation did not arrive."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.gather(*(self.one(r) for r in requests))

    async def one(self, request):
        k = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
        sender = request.get_response_sender()
        for i in range(1, k + 1):
            sender.send(out(i))
        try:
            await asyncio.wait_for(request.wait_cancelled(), timeout=60)
        except asyncio.TimeoutError:
            for i in range(k + 1, 2 * k + 1):
                sender.send(out(i))
        except asyncio.CancelledError:
            pass  # tritonpy cancels the task once all its requests are cancelled
        if request.is_cancelled():
            pb_utils.Logger.log_info(
                f"stream_until_cancelled: request '{request.request_id()}' saw the "
                f"cancellation after {k} responses"
            )
        sender.send(flags=FINAL)
