# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""instance_kind: answers which model instance served the request.

Each instance of a model is its own stub process, initialized with the
``args`` of that instance: its name (``<group name>_<index>``), the kind
of its instance group (``CPU``, ``GPU`` or ``MODEL``) and its device id.
A ``KIND_MODEL`` instance is one that places itself (a model spread over
devices, say); a ``KIND_GPU`` instance would be given a GPU id, and Triton
refuses to load such a group on a machine without a GPU.

The request holds a delay, so that concurrent requests keep several
instances busy at once.
"""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.instance = args["model_instance_name"]
        self.kind = args["model_instance_kind"]
        self.device = int(args["model_instance_device_id"])
        pb_utils.Logger.log_info(
            f"instance {self.instance}: kind {self.kind}, device {self.device}, pid {os.getpid()}"
        )

    def execute(self, requests):
        responses = []
        for request in requests:
            delay = int(pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()[0])
            time.sleep(delay / 1000)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("INSTANCE", np.array([self.instance.encode()], object)),
                        pb_utils.Tensor("KIND", np.array([self.kind.encode()], object)),
                        pb_utils.Tensor("DEVICE", np.array([self.device], np.int32)),
                        pb_utils.Tensor("PID", np.array([os.getpid()], np.int32)),
                    ]
                )
            )
        return responses
