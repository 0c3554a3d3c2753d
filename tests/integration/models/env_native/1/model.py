# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Imports a native extension that links a shared library of its
execution environment's lib/, and says what the environment's activation
set: for tests/integration/test_execution_env_activation.py."""

import json
import os
import subprocess
import sys

import greet_ext  # fails to import unless lib/ is on the loader's path
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        child = subprocess.run(
            ["sh", "-c", 'printf %s "${LD_LIBRARY_PATH-unset}"'],
            capture_output=True,
            text=True,
            check=True,
        )
        info = {
            "greeting": greet_ext.greet(),
            "prefix": sys.prefix,
            "conda_prefix": os.environ.get("CONDA_PREFIX"),
            "greet_data": os.environ.get("TRITONPY_GREET_DATA"),
            "path": os.environ.get("PATH"),
            "ld_library_path": os.environ.get("LD_LIBRARY_PATH", "unset"),
            "child_ld_library_path": child.stdout,
            "marker": os.environ.get("TRITONPY_EXEC_ENV_LIB"),
        }
        out = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
