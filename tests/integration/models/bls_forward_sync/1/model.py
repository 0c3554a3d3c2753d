# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bls_forward with a plain (sync) execute(): exec() from the model's own
thread. CALL is a JSON object: "model", optionally "parameters" and
"decoupled". RESULT is a JSON list with one entry per response that has
outputs (or an error): {"parameters": ...} or {"error": the message}."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


def entry(response):
    if response.has_error():
        return {"error": response.error().message()}
    return {"parameters": json.loads(response.parameters() or "{}")}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = json.loads(pb_utils.get_input_tensor_by_name(request, "CALL").as_numpy()[0])
            inner = pb_utils.InferenceRequest(
                model_name=call["model"],
                inputs=[pb_utils.Tensor("IN", np.array([1], np.int32))],
                requested_output_names=["SEEN"],
                parameters=call.get("parameters", {}),
            )
            decoupled = bool(call.get("decoupled", False))
            got = inner.exec(decoupled=decoupled)
            got = list(got) if decoupled else [got]
            result = [entry(r) for r in got if r.has_error() or r.output_tensors()]
            out = pb_utils.Tensor("RESULT", np.array([json.dumps(result).encode()], dtype=object))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
