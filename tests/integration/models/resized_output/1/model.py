# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Answers each request of a batch with OUT, a [1, n] FP32 array of 0..n-1,
BATCH (how many requests the batch had) and PID (its process). MODE "ok"
sends OUT as made, with n = 4; MODE "<n>-><m>" makes the Tensor of an
[1, n] array, then resizes the array in place to [1, m] (refcheck off,
so numpy reallocates its memory under the Tensor) before returning it:
the Tensor's dims no longer match its array's bytes."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


def counting(n: int) -> np.ndarray:
    arr = np.empty((1, n), np.float32)  # owns its memory: resizable
    arr[0] = np.arange(n, dtype=np.float32)
    return arr


class TritonPythonModel:
    def initialize(self, args):
        self.pid = os.getpid()

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0, 0].decode()
            made, _, resized = mode.partition("->")
            arr = counting(4 if mode == "ok" else int(made))
            out = pb_utils.Tensor("OUT", arr)
            if resized:
                arr.resize((1, int(resized)), refcheck=False)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        out,
                        pb_utils.Tensor("BATCH", np.array([[len(requests)]], np.int64)),
                        pb_utils.Tensor("PID", np.array([[self.pid]], np.int64)),
                    ]
                )
            )
        return responses
