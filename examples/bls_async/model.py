# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bls_async: business logic scripting from an ``async def execute``.

For inputs x and y it answers x*x - y*y, as (x + y) * (x - y) with the sum
and the difference asked of the add_sub model. ``await async_exec()``
gives the event loop back while add_sub works, so one instance keeps the
calls of many requests in flight at once (the sync way is examples/bls).
"""

import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        # All requests of the batch ask add_sub at the same time.
        return await asyncio.gather(*(self.answer(r) for r in requests))

    async def answer(self, request):
        inner = pb_utils.InferenceRequest(
            model_name="add_sub",
            inputs=[
                pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                pb_utils.get_input_tensor_by_name(request, "INPUT1"),
            ],
            requested_output_names=["OUTPUT0", "OUTPUT1"],
        )
        reply = await inner.async_exec()
        if reply.has_error():
            return pb_utils.InferenceResponse(error=reply.error())
        total = pb_utils.get_output_tensor_by_name(reply, "OUTPUT0").as_numpy()
        gap = pb_utils.get_output_tensor_by_name(reply, "OUTPUT1").as_numpy()
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", total * gap)])
