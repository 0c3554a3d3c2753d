# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""plan.py's answers from an async execute; the late ones from the loop."""

import asyncio
import os
import time

import plan


def _later(fn, files):
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + 120

    def when_answered():
        if all(map(os.path.exists, files)) or time.monotonic() > deadline:
            fn()
        else:
            loop.call_later(0.05, when_answered)

    loop.call_later(plan.LATER_S, when_answered)


class TritonPythonModel:
    async def execute(self, requests):
        return plan.execute(requests, _later)
