# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""async def execute forwarding each request to wait_stream with
'await async_exec(decoupled=True)', then a plain (blocking) for over the
responses."""

import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.gather(*(self._forward(r) for r in requests))

    async def _forward(self, request):
        call = pb_utils.InferenceRequest(
            model_name="wait_stream",
            inputs=[pb_utils.get_input_tensor_by_name(request, "PEERS")],
            requested_output_names=["PEAK"],
        )
        sender = request.get_response_sender()
        for response in await call.async_exec(decoupled=True):
            if response.has_error():
                sender.send(pb_utils.InferenceResponse(error=response.error()))
                continue
            peak = pb_utils.get_output_tensor_by_name(response, "PEAK")
            if peak is None:  # the last response may be empty (its final flag)
                continue
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("PEAK", peak.as_numpy())]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
