# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A stream that dies: five tokens 10 ms apart, then a sixth carrying the
wall-clock time at which the stub will die (DIE_AT), then, 50 ms later,
the death MODE asks for ("die" SIGKILL, "exit" os._exit, "segv" a null
read). MODE "ok" ends the stream normally."""

import asyncio
import ctypes
import os
import signal
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def token(i: int, die_at: float = 0.0):
    return pb_utils.InferenceResponse(
        [
            pb_utils.Tensor("INDEX", np.array([i], np.int32)),
            pb_utils.Tensor("DIE_AT", np.array([die_at], np.float64)),
        ]
    )


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            mode = request.inputs()[0].as_numpy()[0].decode()
            sender = request.get_response_sender()
            for i in range(5):
                sender.send(token(i))
                await asyncio.sleep(0.01)
            if mode == "ok":
                sender.send(token(5), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            die_at = time.time() + 0.05
            sender.send(token(5, die_at))
            await asyncio.sleep(max(0.0, die_at - time.time()))
            if mode == "exit":
                os._exit(3)
            elif mode == "segv":
                ctypes.string_at(0)
            os.kill(os.getpid(), signal.SIGKILL)
