# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A BLS callee that tells what it was sent. SEEN is a JSON text of the
request's parameters, correlation id and this model's version; the response
parameters are the request's own plus "echo_version" (this version). In
decoupled mode (echo_request_decoupled) it sends that response, then one
with the parameters {"part": 2}, then the final flag alone."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def answer(request, version, parameters):
    seen = {
        "parameters": json.loads(request.parameters()),
        "correlation_id": request.correlation_id(),
        "version": version,
    }
    out = pb_utils.Tensor("SEEN", np.array([json.dumps(seen).encode()], dtype=object))
    return pb_utils.InferenceResponse([out], parameters=parameters)


class TritonPythonModel:
    def initialize(self, args):
        self.version = int(args["model_version"])
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)

    def execute(self, requests):
        responses = []
        for request in requests:
            params = dict(json.loads(request.parameters()), echo_version=self.version)
            first = answer(request, self.version, params)
            if not self.decoupled:
                responses.append(first)
                continue
            sender = request.get_response_sender()
            sender.send(first)
            sender.send(answer(request, self.version, {"part": 2}))
            sender.send(flags=FINAL)
        return None if self.decoupled else responses
