# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The callee of caps_flood. CMD "hold" logs "caps_hold: holding <n>" (n:
the holds now waiting) and waits until a "release" request comes; "release"
lets every hold go and answers how many there were; "echo" answers at once;
"out:<bytes>" answers <bytes> bytes. HELD: the count, or the bytes."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.held = 0
        self.release = asyncio.Event()

    async def execute(self, requests):
        cmd = pb_utils.get_input_tensor_by_name(requests[0], "CMD").as_numpy()[0].decode()
        held = np.array([self.held], np.int64)
        if cmd == "hold":
            self.held += 1
            pb_utils.Logger.log_info(f"caps_hold: holding {self.held}")
            release = self.release
            await release.wait()
        elif cmd == "release":
            self.release.set()
            self.release = asyncio.Event()
            self.held = 0
        elif cmd.startswith("out:"):
            held = np.zeros(int(cmd[4:]) // 8, np.int64)
        out = pb_utils.Tensor("HELD", held)
        return [pb_utils.InferenceResponse([out]) for _ in requests]
