# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bls: business logic scripting. Each request is handed on to the add_sub
model inside the same server, and add_sub's answer comes back as ours.

``exec()`` waits for the inner answer; from an ``async def execute`` use
``await request.async_exec()`` instead, which lets one instance keep many
inner calls in flight. Outputs of the inner model are read straight from
shared memory, with no copy.
"""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            inner = pb_utils.InferenceRequest(
                model_name="add_sub",
                inputs=[
                    pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                    pb_utils.get_input_tensor_by_name(request, "INPUT1"),
                ],
                requested_output_names=["OUTPUT0", "OUTPUT1"],
            )
            answer = inner.exec()
            if answer.has_error():
                # Pass the inner failure on, as this request's error.
                responses.append(pb_utils.InferenceResponse(error=answer.error()))
                continue
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.get_output_tensor_by_name(answer, "OUTPUT0"),
                        pb_utils.get_output_tensor_by_name(answer, "OUTPUT1"),
                    ]
                )
            )
        return responses
