# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""BLS onto a stateful model: forwards X (as a batch of one row) to accumulate as part of the
sequence SEQ, with the sequence flags FLAGS (START 1, END 2), through
exec() or, when ASYNC is true, async_exec(). The inner response, or its
error, is this request's answer."""

import triton_python_backend_utils as pb_utils


def inner(request):
    def value(name):
        return pb_utils.get_input_tensor_by_name(request, name).as_numpy()[0]

    call = pb_utils.InferenceRequest(
        model_name="accumulate",
        inputs=[
            pb_utils.Tensor(
                "X", pb_utils.get_input_tensor_by_name(request, "X").as_numpy().reshape(1, 1)
            )
        ],
        requested_output_names=["SUM", "CORRID"],
        correlation_id=int(value("SEQ")),
        flags=int(value("FLAGS")),
    )
    return call, bool(value("ASYNC"))


def answer(response):
    if response.has_error():
        return pb_utils.InferenceResponse(error=response.error())
    return pb_utils.InferenceResponse(
        [
            pb_utils.Tensor(
                name, pb_utils.get_output_tensor_by_name(response, name).as_numpy().reshape(-1)
            )
            for name in ("SUM", "CORRID")
        ]
    )


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            call, use_async = inner(request)
            responses.append(answer(await call.async_exec() if use_async else call.exec()))
        return responses
