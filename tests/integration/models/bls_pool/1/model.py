# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Sync BLS from forked processes: execute() maps the numbers 1..COUNT
over a multiprocessing pool (fork start method, up to 8 processes at
once); each child sends add_sub_any a blocking exec() with ELEMENTS (default
4) copies of its number in both inputs, checks that every element of
OUTPUT0 is twice its number and returns that. Each inner call has a 20 s
timeout, so a child whose answer never comes fails its call instead of
holding execute() forever."""

import multiprocessing

import numpy as np
import triton_python_backend_utils as pb_utils


def add_in_child(job):
    n, elements = job
    x = np.full(elements, float(n), np.float32)
    resp = pb_utils.InferenceRequest(
        model_name="add_sub_any",
        inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", x)],
        requested_output_names=["OUTPUT0"],
        timeout=20_000_000,
    ).exec()
    if resp.has_error():
        return f"child {n}: {resp.error().message()}"
    out = pb_utils.get_output_tensor_by_name(resp, "OUTPUT0").as_numpy()
    if out.shape != (elements,) or not np.all(out == 2.0 * n):
        return f"child {n}: wrong OUTPUT0 {out[:4]} of shape {out.shape}"
    return float(out[0])


def scalar(request, name, default):
    t = pb_utils.get_input_tensor_by_name(request, name)
    return default if t is None else int(t.as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            count = scalar(r, "COUNT", 1)
            elements = scalar(r, "ELEMENTS", 4)
            jobs = [(n, elements) for n in range(1, count + 1)]
            with multiprocessing.get_context("fork").Pool(min(count, 8)) as pool:
                results = pool.map(add_in_child, jobs)
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
