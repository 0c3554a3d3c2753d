# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Each instance appends its initialize() args and pid, as one JSON line,
to initialized.jsonl in the model's directory."""

import json
import os
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        line = json.dumps({"args": args, "pid": os.getpid()})
        with open(Path(args["model_repository"]) / "initialized.jsonl", "a") as f:
            f.write(line + "\n")

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("PID", np.array([os.getpid()], np.int32))])
            for _ in requests
        ]
