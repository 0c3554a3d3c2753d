# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""square: a decoupled model. For an input N it sends N responses, each
holding N, then the final flag; N = 0 means no response at all, just the
final flag."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def initialize(self, args):
        if not pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"])):
            raise pb_utils.TritonModelException("square must be deployed decoupled")

    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            sender = request.get_response_sender()
            for _ in range(n):
                out = pb_utils.Tensor("OUT", np.array([n], np.int32))
                sender.send(pb_utils.InferenceResponse([out]))
            sender.send(flags=FINAL)
        return None
