# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""An ``async def execute`` that says in the log when it holds a request,
then waits up to 60 s for the request's cancellation and says whether it
came: a test cancels a request it has seen held, rather than racing a
client timeout against the request's way to the model."""

import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        for r in requests:
            pb_utils.Logger.log_info(f"async_until_cancelled: request '{r.request_id()}' held")
        waits = [asyncio.ensure_future(r.wait_cancelled()) for r in requests]
        try:
            await asyncio.wait(waits, timeout=60)
        except asyncio.CancelledError:
            # tritonpy cancels the task once all its requests are cancelled.
            if not all(r.is_cancelled() for r in requests):
                raise
        finally:
            for w in waits:
                w.cancel()
        responses = []
        for r in requests:
            seen = r.is_cancelled()
            pb_utils.Logger.log_info(
                f"async_until_cancelled: request '{r.request_id()}' cancelled={seen}"
            )
            if seen:
                err = pb_utils.TritonError("cancelled while held", pb_utils.TritonError.CANCELLED)
                responses.append(pb_utils.InferenceResponse(error=err))
            else:
                x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return responses
