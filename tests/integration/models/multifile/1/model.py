# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A model split over several files: helpers/ sits beside model.py."""

import triton_python_backend_utils as pb_utils
from helpers import scale


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", scale(pb_utils.get_input_tensor_by_name(r, "X").as_numpy()))]
            )
            for r in requests
        ]
