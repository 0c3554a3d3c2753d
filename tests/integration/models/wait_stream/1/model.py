# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""An async decoupled model: waits WAIT seconds, then answers with the
most requests it has seen in flight at once."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.inflight = 0
        self.peak = 0

    async def execute(self, requests):
        await asyncio.gather(*(self._one(r) for r in requests))

    async def _one(self, request):
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        wait = float(pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()[0])
        await asyncio.sleep(wait)
        peak = self.peak
        self.inflight -= 1
        sender = request.get_response_sender()
        sender.send(
            pb_utils.InferenceResponse([pb_utils.Tensor("PEAK", np.array([peak], np.int32))])
        )
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
