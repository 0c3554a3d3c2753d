# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Imports torch (no stub_preload anywhere) and makes the parameter
weights_mib's MiB of torch weights once per model in initialize_shared;
every answer reads them all. Each import and each initialize_shared call
appends a line to events.log in the model's version directory, for tests
that count them (test_model_template.py)."""

import json
import os
import sys

import numpy as np
import torch
import triton_python_backend_utils as pb_utils

VERSION = "v1"
EVENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "events.log")


def _event(what):
    with open(EVENTS, "a") as f:
        f.write(f"{what} {os.getpid()}\n")


_event("import")


class TritonPythonModel:
    @classmethod
    def initialize_shared(cls, args):
        _event("shared")
        config = json.loads(args["model_config"])
        mib = int(config["parameters"]["weights_mib"]["string_value"])
        cls.args_keys = sorted(args)
        cls.weights = torch.ones(mib << 18)  # float32: 4 bytes each

    def initialize(self, args):
        self.name = args["model_instance_name"]

    def execute(self, requests):
        out = []
        for _ in requests:
            # An inference that reads every weight, as a model would.
            total = float(self.weights.sum())
            info = {
                "instance": self.name,
                "pid": os.getpid(),
                "version": VERSION,
                "total": total,
                "args_keys": self.args_keys,
                "forked": "tritonpy.stub.template" in sys.modules,
                "threads": torch.get_num_threads(),
            }
            data = np.array([json.dumps(info).encode()], dtype=object)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("INFO", data)]))
        return out
