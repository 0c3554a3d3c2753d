# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Answers, for one input BIG of any length: TOKEN, a number drawn when
the stub started (another stub draws another), BYTES, the input's length,
and VM, the stub's address space in use now (VmSize), which a test sizes
the sandbox's address-space limit from."""

import random

import numpy as np
import triton_python_backend_utils as pb_utils


def vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return -1


class TritonPythonModel:
    def initialize(self, args):
        self.token = random.SystemRandom().randrange(1, 1 << 62)

    def execute(self, requests):
        responses = []
        for request in requests:
            big = pb_utils.get_input_tensor_by_name(request, "BIG").as_numpy()
            out = [
                ("TOKEN", self.token),
                ("BYTES", big.nbytes),
                ("VM", vm_size()),
            ]
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor(n, np.array([v], np.int64)) for n, v in out]
                )
            )
        return responses
