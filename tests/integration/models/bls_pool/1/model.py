# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Sync BLS from forked processes: execute() maps the numbers 1..COUNT
over a multiprocessing pool (fork start method, up to 8 processes at
once); each child sends add_sub_any a blocking exec() with ELEMENTS (default
4) copies of its number in both inputs, checks that every element of
OUTPUT0 is twice its number and returns that. With CONCURRENT = k > 0 a
child makes k such calls at once instead, with async_exec() from
coroutines of its own event loop. Each inner call has a 20 s timeout, so a
child whose answer never comes fails its call instead of holding
execute() forever. POOL picks the pool: 0 (default) a new one per request,
1 the one initialize() made (its processes were forked there), 2 one made
at the first request that asks for it and kept."""

import asyncio
import multiprocessing

import numpy as np
import triton_python_backend_utils as pb_utils


def request(n, elements):
    x = np.full(elements, float(n), np.float32)
    return pb_utils.InferenceRequest(
        model_name="add_sub_any",
        inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", x)],
        requested_output_names=["OUTPUT0"],
        timeout=20_000_000,
    )


async def calls_at_once(n, elements, k):
    return await asyncio.gather(*(request(n, elements).async_exec() for _ in range(k)))


def add_in_child(job):
    n, elements, concurrent = job
    if concurrent > 0:
        answers = [
            check(n, elements, r) for r in asyncio.run(calls_at_once(n, elements, concurrent))
        ]
        errors = [a for a in answers if isinstance(a, str)]
        return errors[0] if errors else answers[0]
    return check(n, elements, request(n, elements).exec())


def check(n, elements, resp):
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
    def initialize(self, args):
        self.pools = {1: multiprocessing.get_context("fork").Pool(2)}

    def finalize(self):
        for pool in self.pools.values():
            pool.terminate()

    def map(self, which, count, jobs):
        if which == 0:
            with multiprocessing.get_context("fork").Pool(min(count, 8)) as pool:
                return pool.map(add_in_child, jobs)
        if which not in self.pools:
            self.pools[which] = multiprocessing.get_context("fork").Pool(2)
        return self.pools[which].map(add_in_child, jobs)

    def execute(self, requests):
        out = []
        for r in requests:
            count = scalar(r, "COUNT", 1)
            elements = scalar(r, "ELEMENTS", 4)
            concurrent = scalar(r, "CONCURRENT", 0)
            jobs = [(n, elements, concurrent) for n in range(1, count + 1)]
            results = self.map(scalar(r, "POOL", 0), count, jobs)
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
