# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Answers IN as OUT, with the request id it saw and the stub's pid; MODE
makes it produce text larger than a frame (tests/integration/
test_request_content.py)."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils

# 300 KB of text between markers, so a test can tell it arrived whole or cut.
BIG = "BIG-START " + "0123456789" * 30_000 + " BIG-END"


class TritonPythonModel:
    def initialize(self, args):
        self.pid = os.getpid()
        self.logger = pb_utils.Logger

    def execute(self, requests):
        responses = []
        for request in requests:
            mode_tensor = pb_utils.get_input_tensor_by_name(request, "MODE")
            mode = b"echo" if mode_tensor is None else mode_tensor.as_numpy().reshape(-1)[0]
            if mode == b"raise_big":
                raise ValueError(BIG)
            if mode == b"fail":
                raise ValueError("request_content fails on purpose")
            if mode == b"log_big":
                self.logger.log_info(BIG)
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            rid = request.request_id().encode("utf-8")
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUT", x),
                        pb_utils.Tensor("ID", np.array([rid], dtype=object)),
                        pb_utils.Tensor("PID", np.array([self.pid], np.int32)),
                    ]
                )
            )
        return responses
