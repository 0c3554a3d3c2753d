# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Calls the model "crash" through BLS with its MODE; an error of that call
(the callee's stub dying) becomes this request's error, prefixed so that
the test can tell it went through here."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE")
            inner = pb_utils.InferenceRequest(
                model_name="crash",
                requested_output_names=["PID"],
                inputs=[pb_utils.Tensor("MODE", mode.as_numpy())],
            ).exec()
            if inner.has_error():
                responses.append(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError(
                            "bls_crash: the call to 'crash' failed: " + inner.error().message()
                        )
                    )
                )
                continue
            pid = pb_utils.get_output_tensor_by_name(inner, "PID").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("PID", pid.copy()),
                        pb_utils.Tensor("CALLER_PID", np.array([os.getpid()], np.int64)),
                    ]
                )
            )
        return responses
