# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Holds `allocate_mib` MiB (a model parameter) that initialize() wrote,
as a model whose weights are loaded per instance does: every page of it is
private to the stub. Answers each request with that size."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.mib = int(config["parameters"]["allocate_mib"]["string_value"])
        # np.ones writes every page, so each is backed by memory of its own.
        self.block = np.ones(self.mib << 20, dtype=np.uint8)

    def execute(self, requests):
        out = np.array([self.mib], dtype=np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("MIB", out)]) for _ in requests]
