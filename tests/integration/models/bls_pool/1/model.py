# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Sync BLS from forked processes: execute() maps COUNT numbers over a
multiprocessing pool (fork start method); each child sends add_sub a
blocking exec() with its number in both inputs and returns the first
element of OUTPUT0. Each inner call has a 20 s timeout, so a child whose
answer never comes fails its call instead of holding execute() forever."""

import multiprocessing

import numpy as np
import triton_python_backend_utils as pb_utils


def add_in_child(n):
    x = np.full(4, float(n), np.float32)
    resp = pb_utils.InferenceRequest(
        model_name="add_sub",
        inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", x)],
        requested_output_names=["OUTPUT0"],
        timeout=20_000_000,
    ).exec()
    if resp.has_error():
        return f"child {n}: {resp.error().message()}"
    return float(pb_utils.get_output_tensor_by_name(resp, "OUTPUT0").as_numpy()[0])


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            count = int(pb_utils.get_input_tensor_by_name(r, "COUNT").as_numpy().reshape(-1)[0])
            with multiprocessing.get_context("fork").Pool(min(count, 4)) as pool:
                results = pool.map(add_in_child, range(1, count + 1))
            errors = [x for x in results if isinstance(x, str)]
            if errors:
                out.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("; ".join(errors)))
                )
            else:
                out.append(
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("SUMS", np.array(results, np.float32))]
                    )
                )
        return out
