# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A decoupled model streaming from the decoupled "square" model through
async BLS (``async for`` over ``async_exec(decoupled=True)``), or with
SYNC=true through a blocking ``exec(decoupled=True)`` in a thread-free
loop. CANCEL_AFTER=k streams from "stream_until_cancelled" instead (k
responses, then it waits for the cancellation) and cancels the inner stream
after k responses; one last response then says how many arrived in all
(-1 marks it). The inner request carries this request's id."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def flag(request, name, default):
    t = pb_utils.get_input_tensor_by_name(request, name)
    return t.as_numpy().reshape(-1)[0] if t is not None else default


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.gather(*(self.one(r) for r in requests))

    async def one(self, request):
        sender = request.get_response_sender()
        cancel_after = int(flag(request, "CANCEL_AFTER", -1))
        if cancel_after < 0:
            target, given = "square", pb_utils.get_input_tensor_by_name(request, "IN")
        else:
            target = "stream_until_cancelled"
            given = pb_utils.Tensor("IN", np.array([cancel_after], np.int32))
        inner = pb_utils.InferenceRequest(
            model_name=target,
            request_id=request.request_id(),
            requested_output_names=["OUT"],
            inputs=[given],
        )
        count = 0
        if bool(flag(request, "SYNC", False)):
            stream = inner.exec(decoupled=True)
        else:
            stream = await inner.async_exec(decoupled=True)
        async for resp in _aiter(stream):
            if resp.has_error():
                if cancel_after < 0:
                    sender.send(pb_utils.InferenceResponse(error=resp.error()), flags=FINAL)
                    return
                continue
            if not resp.output_tensors():
                continue
            count += 1
            sender.send(
                pb_utils.InferenceResponse([pb_utils.get_output_tensor_by_name(resp, "OUT")])
            )
            if count == cancel_after:
                stream.cancel()
        if cancel_after >= 0:
            sender.send(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([-count - 1], np.int32))]
                )
            )
        sender.send(flags=FINAL)


async def _aiter(stream):
    async for resp in stream:
        yield resp
