# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A Python-based backend: installed as backends/shout/model.py, it is the
code of every model whose config says backend: "shout". Each model brings
only its config.pbtxt (and an empty version directory); the parameter
`suffix` makes two models of this backend answer differently."""

import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.name = args["model_name"]
        self.suffix = config["parameters"]["suffix"]["string_value"]

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()[0].decode()
            info = {
                "text": text.upper() + self.suffix,
                "model": self.name,
                "file": __file__,
                "prefix": sys.prefix,
                "tritonpy_stub": "tritonpy.stub" in sys.modules,
                # Forked from a stub template (stub-fork).
                "forked": "tritonpy.stub.template" in sys.modules,
                "parent": os.getppid(),
            }
            out = np.array([json.dumps(info).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
