# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Doubles IN, and reports how many requests shared the batch and which
process served it."""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.pid = os.getpid()
        self.instance = args["model_instance_name"]

    def execute(self, requests):
        time.sleep(0.005)  # long enough for the dynamic batcher to gather work
        n = len(requests)
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            rows = x.shape[0]
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUT", x * 2),
                        pb_utils.Tensor("BATCH", np.full((rows, 1), n, np.int32)),
                        pb_utils.Tensor("PID", np.full((rows, 1), self.pid, np.int32)),
                    ]
                )
            )
        return responses
