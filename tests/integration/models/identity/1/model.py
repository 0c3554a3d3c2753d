# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Echo every input IN_<TYPE> as OUT_<TYPE>. BF16 has no numpy type and
goes through dlpack, as on the official backend."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for tensor in request.inputs():
                name = "OUT_" + tensor.name()[3:]
                if name == "OUT_BF16":
                    outputs.append(pb_utils.Tensor.from_dlpack(name, tensor.to_dlpack()))
                else:
                    outputs.append(pb_utils.Tensor(name, tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
