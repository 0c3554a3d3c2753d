# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Uses the module-level names of the official API that are not classes:
pb_utils.get_model_dir(), pb_utils.TRITON_STRING_TO_NUMPY, and
c_python_backend_utils.shared_memory.free_memory() (read first thing in
execute, as the official restart test's model does). Each answer is the
value or the error it raised. IN[0] is the size of FILL, a float32
output: large ones go through the stub's shared memory."""

import importlib
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


def probe(get):
    try:
        return get()
    except Exception as e:  # noqa: BLE001 - the test reads what went wrong
        return f"{type(e).__name__}: {e}"


def free_memory():
    return importlib.import_module("c_python_backend_utils").shared_memory.free_memory()


def marker():
    with open(os.path.join(pb_utils.get_model_dir(), "marker.txt")) as f:
        return f.read().strip()


class TritonPythonModel:
    def execute(self, requests):
        free = probe(free_memory)
        responses = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            info = {
                "model_dir": probe(lambda: pb_utils.get_model_dir()),
                "marker": probe(marker),
                "types": probe(
                    lambda: {k: v.__name__ for k, v in pb_utils.TRITON_STRING_TO_NUMPY.items()}
                ),
                "free_memory": free,
                "same_tensor": probe(
                    lambda: (
                        importlib.import_module("c_python_backend_utils").Tensor is pb_utils.Tensor
                    )
                ),
                "pid": os.getpid(),
            }
            outputs = [
                pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=object)),
                pb_utils.Tensor("FILL", np.ones(n, np.float32)),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
