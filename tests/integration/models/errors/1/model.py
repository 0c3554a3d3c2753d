# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Misbehaves on request: MODE picks what execute() does wrong (WRONG:
which output it gets wrong)."""

import numpy as np
import triton_python_backend_utils as pb_utils

# Outputs a model may get wrong, by MODE. ("bad_output" is an object array
# holding a non-bytes item.)
WRONG = {
    "list_str": lambda: [1, "two"],
    "obj_int": lambda: np.array([1, 2], dtype=object),
    "noncontig": lambda: np.arange(16, dtype=np.int32)[::2],
    "zero_d": lambda: np.array(7, np.int32),
    "np_scalar": lambda: np.int32(7),
    # A 1 TiB view of one byte: larger than any memory here.
    "huge": lambda: np.broadcast_to(np.zeros(1, np.int32), (1 << 38,)),
}


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
            elif m in WRONG:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", WRONG[m]())]))
            else:
                responses.append(
                    pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([7], np.int32))])
                )
        return responses
