# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Logs one message per level, each naming the request's TAG, and answers
with the line of its first log call (the test expects it in the log)."""

import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_info("logging model: initialize")

    def execute(self, requests):
        responses = []
        logger = pb_utils.Logger
        for request in requests:
            tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()[0].decode()
            line = sys._getframe().f_lineno + 1
            logger.log_info(f"{tag} info")
            logger.log_warn(f"{tag} warn")
            logger.log_error(f"{tag} error")
            logger.log_verbose(f"{tag} verbose")
            logger.log(f"{tag} log-error", logger.ERROR)
            logger.log(f"{tag} log-info")
            pb_utils.Logger.log(f"{tag} log-warning", pb_utils.LogLevel.WARNING)
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("LINE", np.array([line], np.int64))])
            )
        return responses
