# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""async execute() raises after an await, from a helper so that the
traceback has two frames of the model's own."""

import asyncio


def refuse():
    raise ValueError("execute refused on purpose (async)")


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.sleep(0)
        refuse()
