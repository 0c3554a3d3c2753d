# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Completes its config as a decoupled model, then streams N responses
(1, 2, ... N) for an input N."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        c = auto_complete_model_config
        c.add_input({"name": "N", "data_type": "TYPE_INT32", "dims": [1]})
        c.add_output({"name": "I", "data_type": "TYPE_INT32", "dims": [1]})
        c.set_model_transaction_policy({"decoupled": True})
        return c

    def initialize(self, args):
        if not pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"])):
            raise RuntimeError("initialize() did not get the completed config")

    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            sender = request.get_response_sender()
            for i in range(1, n + 1):
                sender.send(
                    pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], np.int32))])
                )
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
