# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""tritonpy.batching.batched in a model, for tests on both backends: each
request's X goes through one call of a batched method with the X of
concurrent requests; Y = 2 X, SIZE is the size of that batch. A negative X
fails its batch. Decoupled, so that the official backend also runs the
requests' coroutines at once."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

from tritonpy.batching import batched

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    # A batch that is not full waits this long for more: long enough that
    # requests sent at once meet even on a busy machine.
    @batched(max_size=4, max_wait=2.0)
    async def double(self, xs):
        if min(xs) < 0:
            raise ValueError(f"negative input in batch {sorted(xs)}")
        return [(2 * x, len(xs)) for x in xs]

    async def execute(self, requests):
        await asyncio.gather(*(self._one(r) for r in requests))

    async def _one(self, request):
        sender = request.get_response_sender()
        x = int(pb_utils.get_input_tensor_by_name(request, "X").as_numpy()[0])
        try:
            y, size = await self.double(x)
        except ValueError as e:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))), flags=FINAL)
            return
        out = [
            pb_utils.Tensor("Y", np.array([y], np.int32)),
            pb_utils.Tensor("SIZE", np.array([size], np.int32)),
        ]
        sender.send(pb_utils.InferenceResponse(out), flags=FINAL)
