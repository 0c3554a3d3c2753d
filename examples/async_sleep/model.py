# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""async_sleep: an ``async def execute`` that awaits SLEEP_MS (default 10)
per batch, standing for a call to another service. On tritonpy many batches
wait at once in one instance; a cancelled request ends early with CANCELLED
and a line in the server's log naming it."""

import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        t = pb_utils.get_input_tensor_by_name(requests[0], "SLEEP_MS")
        delay = (float(t.as_numpy().reshape(-1)[0]) if t is not None else 10.0) / 1000
        work = asyncio.ensure_future(asyncio.sleep(delay))
        watch = [asyncio.ensure_future(r.wait_cancelled()) for r in requests]
        try:
            await asyncio.wait([work, *watch], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # tritonpy cancels the task once all its requests are cancelled:
            # answer them below. Any other cancellation (unload) ends it.
            if not all(r.is_cancelled() for r in requests):
                raise
        finally:
            work.cancel()
            for w in watch:
                w.cancel()
        responses = []
        for r in requests:
            if r.is_cancelled():
                pb_utils.Logger.log_info(f"async_sleep: request '{r.request_id()}' cancelled")
                err = pb_utils.TritonError(
                    "cancelled while sleeping", pb_utils.TritonError.CANCELLED
                )
                responses.append(pb_utils.InferenceResponse(error=err))
            else:
                x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return responses
