# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""add_sub: two float vectors in, their sum and their difference out.

A plain Triton Python model: it runs unchanged on tritonpy (backend
"tritonpy" or the drop-in "python") and on the official Python backend.
"""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.out_types = {
            name: pb_utils.triton_string_to_numpy(
                pb_utils.get_output_config_by_name(config, name)["data_type"]
            )
            for name in ("OUTPUT0", "OUTPUT1")
        }

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            y = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            total = (x + y).astype(self.out_types["OUTPUT0"])
            gap = (x - y).astype(self.out_types["OUTPUT1"])
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUTPUT0", total),
                        pb_utils.Tensor("OUTPUT1", gap),
                    ]
                )
            )
        return responses

    def finalize(self):
        pass
