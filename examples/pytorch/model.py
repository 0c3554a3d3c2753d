# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""pytorch: a PyTorch classifier on the CPU, a linear layer and a softmax.

Inputs reach torch through DLPack (``torch.from_dlpack`` on the input
tensor is a view of the request's shared memory, no copy) and the result
leaves the same way (``pb_utils.Tensor.from_dlpack``). With dynamic
batching Triton hands over several requests at once: they go through the
layer as one batch. The weights are read from weights.json in the version
directory.
"""

import json
import os

import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # One thread per instance: scale with instance_group count instead.
        torch.set_num_threads(1)
        path = os.path.join(args["model_repository"], args["model_version"], "weights.json")
        with open(path) as f:
            params = json.load(f)
        weight = torch.tensor(params["weight"], dtype=torch.float32)
        self.layer = torch.nn.Linear(weight.shape[1], weight.shape[0])
        with torch.no_grad():
            self.layer.weight.copy_(weight)
            self.layer.bias.copy_(torch.tensor(params["bias"], dtype=torch.float32))
        self.layer.eval()

    def execute(self, requests):
        batches = [
            torch.from_dlpack(pb_utils.get_input_tensor_by_name(r, "FEATURES")) for r in requests
        ]
        with torch.inference_mode():
            probs = torch.softmax(self.layer(torch.cat(batches)), dim=1)
        # Each request gets its own rows back, still without a copy.
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack("PROBS", part)])
            for part in torch.split(probs, [len(b) for b in batches])
        ]
