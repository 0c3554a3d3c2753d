# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Inputs into torch and results out, all through DLPack.

Y = (2 X + 1) transposed and XT = X transposed (both non-contiguous torch
tensors handed to Tensor.from_dlpack; XT is a view of the input's memory),
B2 = 2 B in bfloat16. SHARED says whether torch saw the input's memory
without a copy and whether the output tensor holds torch's memory.
"""

import numpy as np
import torch
import triton_python_backend_utils as pb_utils

torch.set_num_threads(1)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x_in = pb_utils.get_input_tensor_by_name(request, "X")
            x = torch.from_dlpack(x_in)
            y = (x * 2 + 1).T
            y_out = pb_utils.Tensor.from_dlpack("Y", y)
            shared = [
                x.data_ptr() == x_in.as_numpy().ctypes.data,
                y_out.as_numpy().ctypes.data == y.data_ptr(),
            ]
            outputs = [
                y_out,
                pb_utils.Tensor.from_dlpack("XT", x.T),
                pb_utils.Tensor("SHARED", np.array(shared)),
            ]
            b_in = pb_utils.get_input_tensor_by_name(request, "B")
            if b_in is not None:
                b = torch.from_dlpack(b_in)
                assert b.dtype == torch.bfloat16, b.dtype
                outputs.append(pb_utils.Tensor.from_dlpack("B2", b * 2))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
