# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A model whose initialize takes seconds: a load of it keeps the
model-control worker busy (tests/integration/test_hostile_barriers.py)."""

import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(3)

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "DUMMY").as_numpy())]
            )
            for r in requests
        ]
