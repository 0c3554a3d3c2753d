# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Outputs that are not plain contiguous arrays: transposed and strided
views, a zero-size tensor, a 4 MiB tensor that travels through the arena,
and 4 MiB written in place into shared memory (pb_utils.Tensor.empty)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            filled = pb_utils.Tensor.empty("FILLED", [1 << 20], np.float32)
            filled.as_numpy()[:] = float(x.sum())
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("TRANSPOSED", x.T),
                        pb_utils.Tensor("EVERY_OTHER_ROW", x[::2]),
                        pb_utils.Tensor("EMPTY", np.zeros((0, x.shape[1]), np.float32)),
                        pb_utils.Tensor(
                            "BIG", np.arange(1 << 20, dtype=np.float32) + float(x.sum())
                        ),
                        filled,
                    ]
                )
            )
        return responses
