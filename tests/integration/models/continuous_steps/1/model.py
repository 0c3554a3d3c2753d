# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""tritonpy.batching.ContinuousBatcher in a decoupled model, for tests on
both backends. A stream of COUNT responses: VALUE counts 0, 1, ...; STEP is
the batcher's step it came from and BATCH how many streams that step held.
COUNT 0 answers at once with the batcher's ACTIVE and WAITING counts.
Each step takes 2 ms (a sleep in the batcher's thread); while a file named
"hold" exists in the model's directory, a step waits before it runs (a test
holds the batch still while streams queue up)."""

import asyncio
import json
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

from tritonpy.batching import ContinuousBatcher

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _tensors(**values):
    dtypes = {"STEP": np.int64}
    return [pb_utils.Tensor(k, np.array([v], dtypes.get(k, np.int32))) for k, v in values.items()]


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.count = 0
        self.hold = Path(args["model_repository"]) / "hold"
        self.batcher = ContinuousBatcher(
            self._step,
            max_active=int(params["max_active"]["string_value"]),
            cache_budget=int(params["cache_budget"]["string_value"]),
        )

    def _step(self, batch):
        while self.hold.exists():
            time.sleep(0.01)
        time.sleep(0.002)
        self.count += 1
        return [(s.steps, self.count, len(batch)) for s in batch]

    async def execute(self, requests):
        await asyncio.gather(*(self._one(r) for r in requests))

    async def _one(self, request):
        sender = request.get_response_sender()
        count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
        cost = pb_utils.get_input_tensor_by_name(request, "COST")
        if count == 0:
            b = self.batcher
            sender.send(
                pb_utils.InferenceResponse(_tensors(ACTIVE=b.active, WAITING=b.waiting)),
                flags=FINAL,
            )
            return
        async for value, step, size in self.batcher.generate(
            None,
            steps=count,
            cost=1 if cost is None else int(cost.as_numpy()[0]),
            cancelled=request.is_cancelled,
        ):
            sender.send(pb_utils.InferenceResponse(_tensors(VALUE=value, STEP=step, BATCH=size)))
        sender.send(flags=FINAL)

    def finalize(self):
        self.batcher.close()
