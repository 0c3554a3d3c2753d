# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Calls the API with the arguments the official binding refuses, inside a
stub, and answers which exception each call raised (None: it did not)."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

_IN = [pb_utils.Tensor("X", np.asarray([1, 2], dtype=np.int32))]
_REQUEST = {"inputs": _IN, "model_name": "m", "requested_output_names": ["Y"]}

ATTEMPTS = {
    "request_inputs_none_item": lambda: pb_utils.InferenceRequest(**{**_REQUEST, "inputs": [None]}),
    "request_inputs_none": lambda: pb_utils.InferenceRequest(**{**_REQUEST, "inputs": None}),
    "request_model_name_none": lambda: pb_utils.InferenceRequest(
        **{**_REQUEST, "model_name": None}
    ),
    "request_output_names_none_item": lambda: pb_utils.InferenceRequest(
        **{**_REQUEST, "requested_output_names": [None]}
    ),
    "request_output_names_none": lambda: pb_utils.InferenceRequest(
        **{**_REQUEST, "requested_output_names": None}
    ),
    "request_correlation_id_none": lambda: pb_utils.InferenceRequest(
        **_REQUEST, correlation_id=None
    ),
    "request_request_id_none": lambda: pb_utils.InferenceRequest(**_REQUEST, request_id=None),
    "request_model_version_none": lambda: pb_utils.InferenceRequest(**_REQUEST, model_version=None),
    "request_flags_none": lambda: pb_utils.InferenceRequest(**_REQUEST, flags=None),
    "response_outputs_none_item": lambda: pb_utils.InferenceResponse(output_tensors=[None]),
    "response_outputs_none": lambda: pb_utils.InferenceResponse(output_tensors=None),
    "tensor_name_none": lambda: pb_utils.Tensor(None, np.zeros(2)),
    "tensor_array_none": lambda: pb_utils.Tensor("Y", None),
    "tensor_dlpack_none": lambda: pb_utils.Tensor.from_dlpack("Y", None),
    "log_level_none": lambda: pb_utils.Logger.log("x", None),
    "log_level_int": lambda: pb_utils.Logger.log("x", 1),
    "log_info_none": lambda: pb_utils.Logger.log_info(None),
    "log_verbose_none": lambda: pb_utils.Logger.log_verbose(None),
}


class TritonPythonModel:
    def execute(self, requests):
        raised = {}
        for name, attempt in ATTEMPTS.items():
            try:
                attempt()
            except Exception as e:  # noqa: BLE001 - which one is the answer
                raised[name] = type(e).__name__
            else:
                raised[name] = None
        out = np.array([json.dumps(raised).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
