# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Answers CONTEXT: its request's trace context ("" for None). A non-empty
CALL names a model (with IN_FP32 / OUT_FP32, as identity) that it calls
first through BLS, passing its request's trace."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            callee = pb_utils.get_input_tensor_by_name(request, "CALL").as_numpy()[0].decode()
            if callee:
                answer = pb_utils.InferenceRequest(
                    model_name=callee,
                    inputs=[pb_utils.Tensor("IN_FP32", np.array([1.0], np.float32))],
                    requested_output_names=["OUT_FP32"],
                    trace=request.trace(),
                ).exec()
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
            context = request.trace().get_context() or ""
            out = pb_utils.Tensor("CONTEXT", np.array([context.encode()], dtype=object))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
