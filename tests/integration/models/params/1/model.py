# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Echoes the request's parameters: as a JSON string output, and as
response parameters (plus one of each kind), in default or decoupled mode."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)

    def execute(self, requests):
        responses = []
        for r in requests:
            params = json.loads(r.parameters())
            out = pb_utils.Tensor(
                "PARAMS", np.array([json.dumps(params, sort_keys=True).encode()], dtype=object)
            )
            echo = {k: v for k, v in params.items() if isinstance(v, (bool, int, str))}
            echo.update({"answered_by": "tritonpy", "count": len(params), "echoed": True})
            resp = pb_utils.InferenceResponse([out], parameters=echo)
            if self.decoupled:
                r.get_response_sender().send(resp, flags=FINAL)
            else:
                responses.append(resp)
        return None if self.decoupled else responses
