# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A sync model with one instance that calls itself with a blocking exec():
the call could never run, so it must fail at once with a clear error."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            resp = pb_utils.InferenceRequest(
                model_name="bls_self",
                requested_output_names=["OUT"],
                inputs=[pb_utils.get_input_tensor_by_name(r, "IN")],
            ).exec()
            out.append(pb_utils.InferenceResponse(error=resp.error()) if resp.has_error() else resp)
        return out
