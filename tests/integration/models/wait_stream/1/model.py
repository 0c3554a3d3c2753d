# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""An async decoupled model: waits until PEERS requests are in flight at
once (for at most a minute), then answers with the most it has seen in
flight at once."""

import asyncio
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.inflight = 0
        self.peak = 0
        self.met = 0  # the PEERS that were in flight at once, until all left

    async def execute(self, requests):
        await asyncio.gather(*(self._one(r) for r in requests))

    async def _one(self, request):
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        peers = int(pb_utils.get_input_tensor_by_name(request, "PEERS").as_numpy()[0])
        deadline = time.monotonic() + 60
        while self.inflight < peers and self.met != peers and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if self.inflight >= peers:
            self.met = peers
        peak = self.peak
        self.inflight -= 1
        if self.inflight == 0:
            self.met = 0
        sender = request.get_response_sender()
        sender.send(
            pb_utils.InferenceResponse([pb_utils.Tensor("PEAK", np.array([peak], np.int32))])
        )
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
