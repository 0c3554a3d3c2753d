# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Instances that load only when they start together: each initialize()
leaves a mark in started/ and one in running/ beside the model, waits
until `together` instances have started (at most `wait_seconds`), appends
how many were running at that moment to seen.txt and removes its running
mark. With `must_meet` "true" an instance that waited in vain fails,
saying how many had started."""

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
        must_meet = params["must_meet"]["string_value"] == "true"
        here = Path(args["model_repository"])
        marks = [here / "started" / args["model_instance_name"]]
        marks.append(here / "running" / args["model_instance_name"])
        for mark in marks:
            mark.parent.mkdir(exist_ok=True)
            mark.touch()
        deadline = time.monotonic() + wait
        while (started := len(list(marks[0].parent.iterdir()))) < together:
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        with open(here / "seen.txt", "a") as f:
            f.write(f"{len(list(marks[1].parent.iterdir()))}\n")
        marks[1].unlink()
        if started < together and must_meet:
            raise pb_utils.TritonModelException(
                f"only {started} of {together} instances began initialize() within {wait:g} s"
            )

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("PID", np.array([os.getpid()], np.int32))])
            for _ in requests
        ]
