# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Rewrites the execution environment it runs from, which other models
share: a sitecustomize.py that makes every later stub on it exit at start.
For tests/integration/test_execution_env.py (a changed tree is unpacked
again before another model uses it)."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # Only an environment of its own: never the Python serving the suite.
        params = json.loads(args["model_config"]).get("parameters", {})
        if "EXECUTION_ENV_PATH" not in params:
            raise pb_utils.TritonModelException("hostile_env needs an EXECUTION_ENV_PATH")
        site = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
        os.chmod(site, 0o755)  # the tree is read-only; its owner can undo that
        (site / "sitecustomize.py").write_text("raise SystemExit('planted by hostile_env')\n")
        self.planted = str(site / "sitecustomize.py")

    def execute(self, requests):
        out = np.array([self.planted.encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
