# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A BLS caller driven by its input. CALL is a JSON object: "model", and
optionally "model_version", "correlation_id", "parameters", "decoupled"
and "async" (async_exec() instead of exec()). It sends IN = 1 to that
model and answers RESULT, a JSON list with one entry per response that has
outputs (or an error): {"seen": the callee's SEEN decoded, "parameters":
the response's parameters} or {"error": the error's message}."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


def entry(response):
    if response.has_error():
        return {"error": response.error().message()}
    seen = pb_utils.get_output_tensor_by_name(response, "SEEN").as_numpy()[0]
    return {"seen": json.loads(seen), "parameters": json.loads(response.parameters() or "{}")}


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            call = json.loads(pb_utils.get_input_tensor_by_name(request, "CALL").as_numpy()[0])
            kwargs = {
                k: call[k] for k in ("model_version", "correlation_id", "parameters") if k in call
            }
            inner = pb_utils.InferenceRequest(
                model_name=call["model"],
                inputs=[pb_utils.Tensor("IN", np.array([1], np.int32))],
                requested_output_names=["SEEN"],
                **kwargs,
            )
            decoupled = bool(call.get("decoupled", False))
            if not call.get("async", False):
                got = inner.exec(decoupled=decoupled)
                got = list(got) if decoupled else [got]
            elif decoupled:
                got = [r async for r in await inner.async_exec(decoupled=True)]
            else:
                got = [await inner.async_exec()]
            result = [entry(r) for r in got if r.has_error() or r.output_tensors()]
            out = pb_utils.Tensor("RESULT", np.array([json.dumps(result).encode()], dtype=object))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
