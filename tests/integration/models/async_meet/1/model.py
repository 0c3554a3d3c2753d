# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Async execute for tests of concurrency, with nothing timed: N > 0 waits
(up to 2 minutes) until N executes of N > 0 run at once and answers how
many it saw (STARTED): N from every request only if they did. N <= 0 logs
"async_meet: request '<id>' holds" and waits until it is cancelled or the
model is unloaded."""

import asyncio
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.running = 0
        self.met = 0  # the N that ran at once, until they have all left

    async def execute(self, requests):
        n = int(requests[0].inputs()[0].as_numpy()[0])
        if n <= 0:
            for r in requests:
                pb_utils.Logger.log_info(f"async_meet: request '{r.request_id()}' holds")
            await asyncio.Event().wait()
        self.running += 1
        try:
            deadline = time.monotonic() + 120
            while self.running < n and self.met != n and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            if self.running >= n:
                self.met = n
            seen = n if self.met == n else self.running
        finally:
            self.running -= 1
            if self.running == 0:
                self.met = 0
        out = np.array([seen], np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("STARTED", out)]) for _ in requests]
