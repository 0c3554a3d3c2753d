# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Says which interpreter runs its stub: for execution environment tests."""

import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

import tritonpy


class TritonPythonModel:
    def execute(self, requests):
        info = {
            "executable": sys.executable,
            "prefix": sys.prefix,
            "version": list(sys.version_info[:2]),
            "tritonpy": os.path.realpath(tritonpy.__file__),
            "numpy": os.path.realpath(np.__file__),
        }
        out = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
