# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Sync BLS: forwards INPUT0/INPUT1 to TARGET (default add_sub) with a
blocking exec(); an error of the inner call becomes this request's error.
TARGET "bad_shape" sends add_sub an input of the wrong shape; TARGET
"async_sleep" sleeps 3 s there (with TIMEOUT_US that must time out)."""

import numpy as np
import triton_python_backend_utils as pb_utils


def build(request):
    target = pb_utils.get_input_tensor_by_name(request, "TARGET")
    target = target.as_numpy().reshape(-1)[0].decode() if target is not None else "add_sub"
    timeout = pb_utils.get_input_tensor_by_name(request, "TIMEOUT_US")
    timeout = int(timeout.as_numpy().reshape(-1)[0]) if timeout is not None else 0
    a = pb_utils.get_input_tensor_by_name(request, "INPUT0")
    b = pb_utils.get_input_tensor_by_name(request, "INPUT1")
    if target == "bad_shape":
        target = "add_sub"
        a = pb_utils.Tensor("INPUT0", a.as_numpy()[:3].copy())
    if target == "async_sleep":
        return pb_utils.InferenceRequest(
            model_name="async_sleep",
            requested_output_names=["OUT"],
            timeout=timeout,
            inputs=[
                pb_utils.Tensor("IN", np.array([1], np.int32)),
                pb_utils.Tensor("SLEEP_MS", np.array([3000], np.float32)),
            ],
        )
    return pb_utils.InferenceRequest(
        model_name=target,
        inputs=[a, b],
        requested_output_names=["OUTPUT0", "OUTPUT1"],
        timeout=timeout,
    )


def answer(resp):
    if resp.has_error():
        return pb_utils.InferenceResponse(error=resp.error())
    return pb_utils.InferenceResponse(
        [
            pb_utils.Tensor(
                "OUTPUT0", pb_utils.get_output_tensor_by_name(resp, "OUTPUT0").as_numpy()
            ),
            pb_utils.Tensor(
                "OUTPUT1", pb_utils.get_output_tensor_by_name(resp, "OUTPUT1").as_numpy()
            ),
        ]
    )


class TritonPythonModel:
    def execute(self, requests):
        return [answer(build(r).exec()) for r in requests]
