# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A crash loop: the first stub serves; once a file "started" exists in the
model directory every later stub exits in initialize() (status 5). MODE
"die" ends the first one."""

import os
import signal
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        marker = Path(args["model_repository"]) / "started"
        if marker.exists():
            os._exit(5)
        marker.touch()

    def execute(self, requests):
        for request in requests:
            if request.inputs()[0].as_numpy()[0].decode() == "die":
                os.kill(os.getpid(), signal.SIGKILL)
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))])
            for _ in requests
        ]
