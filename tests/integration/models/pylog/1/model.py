# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Logs with Python's logging module, naming the request's TAG, and
answers with the line of its first logging call. As "pylog_own" it
configures logging itself first (logging.basicConfig)."""

import logging
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

log = logging.getLogger(__name__)
chatty = logging.getLogger("pylog.chatty")
chatty.setLevel(logging.INFO)
log.warning("%s model imported", __name__)  # before any setting of the model's


class TritonPythonModel:
    def initialize(self, args):
        if args["model_name"].endswith("_own"):
            logging.basicConfig(stream=sys.stderr, format="OWN-FORMAT %(levelname)s %(message)s")

    def execute(self, requests):
        responses = []
        for request in requests:
            tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()[0].decode()
            line = sys._getframe().f_lineno + 1
            log.warning("%s warning", tag)
            log.error("%s error", tag)
            log.info("%s quiet-info", tag)  # below the logger's level: nowhere
            chatty.info("%s chatty-info", tag)
            chatty.debug("%s quiet-debug", tag)
            try:
                raise KeyError("boom")
            except KeyError:
                log.exception("%s exception", tag)
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("LINE", np.array([line], np.int64))])
            )
        return responses
