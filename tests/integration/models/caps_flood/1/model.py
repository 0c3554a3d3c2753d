# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Makes the server hold what MODE asks for, through the model API only
(the per-stub caps of docs/hardening.md), and answers with its process id:

- "ok": nothing;
- "log:<lines>:<bytes>": logs <lines> lines of <bytes> bytes each, every one
  with "caps-flood-line" in it;
- "bls_many:<n>": <n> BLS calls at once to caps_hold ("hold"), then waits
  for all of them; if any failed, raises TritonModelException with how many
  and the first one's error, as a model written for the official backend
  would;
- "bls_in:<bytes>": one BLS call to caps_hold with <bytes> of input;
- "bls_out:<bytes>": one BLS call to caps_hold that answers <bytes>."""

import asyncio
import os

import numpy as np
import triton_python_backend_utils as pb_utils


def call(cmd: str, data: bytes = b"") -> pb_utils.InferenceRequest:
    inputs = [pb_utils.Tensor("CMD", np.array([cmd.encode()], dtype=object))]
    if data:
        inputs.append(pb_utils.Tensor("DATA", np.frombuffer(data, np.uint8)))
    return pb_utils.InferenceRequest(
        model_name="caps_hold", inputs=inputs, requested_output_names=["HELD"]
    )


def raise_if_failed(responses: list, n: int) -> None:
    failed = [r for r in responses if r.has_error()]
    if failed:
        raise pb_utils.TritonModelException(
            f"{len(failed)} of {n} BLS calls failed: {failed[0].error().message()}"
        )


class TritonPythonModel:
    async def execute(self, requests):
        out = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            what, _, arg = mode.partition(":")
            if what == "log":
                lines, size = (int(x) for x in arg.split(":"))
                text = "caps-flood-line " + "x" * max(0, size - 16)
                for _ in range(lines):
                    pb_utils.Logger.log_info(text)
            elif what == "bls_many":
                n = int(arg)
                got = await asyncio.gather(*(call("hold").async_exec() for _ in range(n)))
                raise_if_failed(list(got), n)
            elif what == "bls_in":
                raise_if_failed([await call("echo", b"\x01" * int(arg)).async_exec()], 1)
            elif what == "bls_out":
                raise_if_failed([await call(f"out:{arg}").async_exec()], 1)
            pid = np.array([os.getpid()], np.int64)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("PID", pid)]))
        return out
