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
instances busy at once. Each answer names the process that served it:
its pid and its pid namespace. A pid alone tells processes apart only
within one pid namespace; under ``stub-sandbox=true`` each stub is pid 1
of a namespace of its own, and the namespace tells them apart.
"""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def pid_namespace():
    """The inode of this process's pid namespace (0 where /proc does not
    say)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


class TritonPythonModel:
    def initialize(self, args):
        self.instance = args["model_instance_name"]
        self.kind = args["model_instance_kind"]
        self.device = int(args["model_instance_device_id"])
        self.namespace = pid_namespace()
        pb_utils.Logger.log_info(
            f"instance {self.instance}: kind {self.kind}, device {self.device}, "
            f"pid {os.getpid()} in pid namespace {self.namespace}"
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
                        pb_utils.Tensor("PID_NAMESPACE", np.array([self.namespace], np.int64)),
                    ]
                )
            )
        return responses
