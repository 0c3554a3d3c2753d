# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bls_decoupled: a streaming model built from other models with async BLS.

For X and STEPS = n it asks the decoupled square model for n, and for each
response square streams back it adds X once more with the add_sub model,
then streams the running sum: step k answers SUM = k * X, STEP = k. A
cancelled request cancels the inner stream too.

The official Python backend cannot run async BLS in a decoupled model;
tritonpy can, with every call on the stub's event loop (no threads).
"""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.gather(*(self.stream(r) for r in requests))

    async def stream(self, request):
        sender = request.get_response_sender()
        x = pb_utils.get_input_tensor_by_name(request, "X")
        ticks = await pb_utils.InferenceRequest(
            model_name="square",
            requested_output_names=["OUT"],
            inputs=[_renamed(pb_utils.get_input_tensor_by_name(request, "STEPS"), "IN")],
        ).async_exec(decoupled=True)
        total = pb_utils.Tensor("SUM", np.zeros(4, np.float32))
        step = 0
        async for tick in ticks:
            if request.is_cancelled():
                ticks.cancel()
                break
            if tick.has_error():
                sender.send(pb_utils.InferenceResponse(error=tick.error()), flags=FINAL)
                return
            if not tick.output_tensors():  # the stream's empty last response
                continue
            reply = await pb_utils.InferenceRequest(
                model_name="add_sub",
                inputs=[_renamed(total, "INPUT0"), _renamed(x, "INPUT1")],
                requested_output_names=["OUTPUT0"],
            ).async_exec()
            if reply.has_error():
                ticks.cancel()
                sender.send(pb_utils.InferenceResponse(error=reply.error()), flags=FINAL)
                return
            step += 1
            total = _renamed(pb_utils.get_output_tensor_by_name(reply, "OUTPUT0"), "SUM")
            sender.send(
                pb_utils.InferenceResponse(
                    [total, pb_utils.Tensor("STEP", np.array([step], np.int32))]
                )
            )
        sender.send(flags=FINAL)


def _renamed(tensor, name):
    """The same data under another name (a zero-copy view)."""
    return pb_utils.Tensor(name, tensor.as_numpy())
