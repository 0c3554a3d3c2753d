# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Async BLS: like bls_add_sub, with ``await async_exec()``. FANOUT=N runs
N calls at once and checks that they all agree and that no thread was
started for them."""

import asyncio
import importlib.util
import os
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

_spec = importlib.util.spec_from_file_location(
    "bls_sync_helpers", os.path.join(os.path.dirname(__file__), "helpers.py")
)
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)


class TritonPythonModel:
    async def execute(self, requests):
        return list(await asyncio.gather(*(self.one(r) for r in requests)))

    async def one(self, request):
        fan = pb_utils.get_input_tensor_by_name(request, "FANOUT")
        n = int(fan.as_numpy().reshape(-1)[0]) if fan is not None else 1
        threads = threading.active_count()
        got = await asyncio.gather(*(helpers.build(request).async_exec() for _ in range(n)))
        if threading.active_count() != threads:
            return pb_utils.InferenceResponse(
                error=pb_utils.TritonError(
                    f"thread count changed: {threads} -> {threading.active_count()}"
                )
            )
        first = helpers.answer(got[0])
        for resp in got[1:]:
            if resp.has_error() or not np.array_equal(
                pb_utils.get_output_tensor_by_name(resp, "OUTPUT0").as_numpy(),
                pb_utils.get_output_tensor_by_name(got[0], "OUTPUT0").as_numpy(),
            ):
                return pb_utils.InferenceResponse(error=pb_utils.TritonError("fan-out disagrees"))
        return first
