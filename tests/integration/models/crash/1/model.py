# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Answers with its process id; MODE "die" kills the stub mid-execute,
MODE "slow" takes 50 ms."""

import os
import signal
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = request.inputs()[0].as_numpy()[0].decode()
            if mode == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "slow":
                time.sleep(0.05)
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))]))
        return responses
