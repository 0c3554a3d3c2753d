# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""auto_complete_config logs, then raises: the load fails with the
exception, and the log line reaches Triton's log."""

import triton_python_backend_utils as pb_utils


def read_header():
    raise RuntimeError("cannot read the weights header to size the inputs")


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        pb_utils.Logger.log_warn("ac_raises: looking for the weights header")
        read_header()
        return auto_complete_model_config

    def execute(self, requests):
        return []
