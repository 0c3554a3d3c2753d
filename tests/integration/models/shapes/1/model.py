# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Outputs that are not plain contiguous arrays: transposed and strided
views, a zero-size tensor, and a 4 MiB tensor that travels through the arena."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("TRANSPOSED", x.T),
                        pb_utils.Tensor("EVERY_OTHER_ROW", x[::2]),
                        pb_utils.Tensor("EMPTY", np.zeros((0, x.shape[1]), np.float32)),
                        pb_utils.Tensor(
                            "BIG", np.arange(1 << 20, dtype=np.float32) + float(x.sum())
                        ),
                    ]
                )
            )
        return responses
