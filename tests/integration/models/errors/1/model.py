# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Misbehaves on request: MODE picks what execute() does wrong."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        mode = requests[0].inputs()[0].as_numpy()[0].decode()
        if mode == "raise":
            raise RuntimeError("the model raised on purpose")
        if mode == "count":
            return []
        if mode == "type":
            return ["not a response" for _ in requests]
        responses = []
        for request in requests:
            m = request.inputs()[0].as_numpy()[0].decode()
            if m == "error":
                err = pb_utils.TritonError("refused on purpose", pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=err))
            elif m == "bad_output":
                bad = np.array([1, "two", None], dtype=object)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", bad)]))
            else:
                responses.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([7], np.int32))]))
        return responses
