# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A Python-based backend (backends/dirinfo/model.py) whose models keep
their own settings in their version directory, found through
pb_utils.get_model_dir(), as the official QA's add_sub backend and vLLM's
backend find theirs."""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        with open(os.path.join(pb_utils.get_model_dir(), "settings.json")) as f:
            self.settings = json.load(f)

    def execute(self, requests):
        info = {
            "model_dir": pb_utils.get_model_dir(),
            "settings": self.settings,
            "name": __name__,
            "package": __package__,
        }
        out = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
