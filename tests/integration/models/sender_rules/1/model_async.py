# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""plan.py's answers from an async execute; the late ones from the loop."""

import asyncio

import plan


def _later(fn):
    asyncio.get_running_loop().call_later(plan.LATER_S, fn)


class TritonPythonModel:
    async def execute(self, requests):
        return plan.execute(requests, _later)
