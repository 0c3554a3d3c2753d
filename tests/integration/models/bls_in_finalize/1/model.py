# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""BLS in finalize() is refused, as on the official backend."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = pb_utils.Tensor("OUT", np.array([1], np.int32))
        return [pb_utils.InferenceResponse([out]) for _ in requests]

    def finalize(self):
        pb_utils.InferenceRequest(
            model_name="add_sub",
            inputs=[pb_utils.Tensor("INPUT0", np.ones(4, np.float32))],
            requested_output_names=["OUTPUT0"],
        ).exec(decoupled=True)
