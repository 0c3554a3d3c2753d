# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""is_ready() says no, and logs each time it is asked; execute() answers
IN as OUT."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def is_ready(self):
        pb_utils.Logger.log_warn("never_ready: is_ready() was asked")
        return False

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]
            )
            for r in requests
        ]
