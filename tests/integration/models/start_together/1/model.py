# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Instances that load only when they start together: each initialize()
leaves a file named after its instance in started/ beside the model, then
waits until `together` such files exist (at most `wait_seconds`), and fails
saying how many it saw if they never do."""

import json
import os
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        together = int(params["together"]["string_value"])
        wait = float(params["wait_seconds"]["string_value"])
        started = Path(args["model_repository"]) / "started"
        started.mkdir(exist_ok=True)
        (started / args["model_instance_name"]).touch()
        deadline = time.monotonic() + wait
        while (seen := len(list(started.iterdir()))) < together:
            if time.monotonic() > deadline:
                raise pb_utils.TritonModelException(
                    f"only {seen} of {together} instances began initialize() within {wait:g} s"
                )
            time.sleep(0.01)

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("PID", np.array([os.getpid()], np.int32))])
            for _ in requests
        ]
