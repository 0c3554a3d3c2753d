# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Answers each request as its PLAN input says, through its response sender
before and after execute() returns, and/or in execute()'s result.

PLAN is a comma-separated list: ``pre=N`` responses sent during execute,
``pre_final`` then the final flag; ``ret`` a response returned; ``post=N``
responses sent after execute returned, ``post_final`` then the final flag.
Each response's INDEX says where it came from: 0 returned, 1000 + i sent
during execute, 2000 + i sent afterwards. What a send after execute returned
raises is logged ("send raised: ..."); during execute it propagates. Once
a request's plan is over (its late sends done, or execute raised), "plan
done: <request id>" is logged.

A request that both returns a response and sends late ones holds its late
sends until the test has the returned response (it creates the file
``answered(request id)``): only then is the return surely handled first."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
LATER_S = 0.3  # how long after execute returned the late sends start
HERE = os.path.dirname(os.path.abspath(__file__))


def answered(request_id):
    """The file the test creates once it holds ``request_id``'s returned
    response (in this model's version directory)."""
    return os.path.join(HERE, f"answered-{request_id}")


def plan_of(request):
    text = pb_utils.get_input_tensor_by_name(request, "PLAN").as_numpy().reshape(-1)[0]
    plan = {"pre": 0, "pre_final": False, "ret": False, "post": 0, "post_final": False}
    for token in filter(None, text.decode().split(",")):
        key, _, count = token.partition("=")
        if key not in plan:
            raise ValueError(f"unknown step {key!r}")
        plan[key] = int(count) if count else True
    return plan


def indexed(index):
    return pb_utils.InferenceResponse([pb_utils.Tensor("INDEX", np.array([[index]], np.int32))])


def send(sender, count, final, base):
    for i in range(count):
        sender.send(indexed(base + i))
    if final:
        sender.send(flags=FINAL)


def done(requests):
    for request in requests:
        pb_utils.Logger.log_info(f"plan done: {request.request_id()}")


def execute(requests, later):
    """``later(fn, files)`` calls fn once execute has returned and every
    one of ``files`` exists."""
    post, returned, files = [], [], []
    try:
        for request in requests:
            p = plan_of(request)
            sender = None
            if p["pre"] or p["pre_final"] or p["post"] or p["post_final"]:
                sender = request.get_response_sender()
            send(sender, p["pre"], p["pre_final"], 1000)
            post.append((sender, p["post"], p["post_final"]))
            returned.append(indexed(0) if p["ret"] else None)
            if p["ret"] and (p["post"] or p["post_final"]):
                files.append(answered(request.request_id()))
    except Exception:
        done(requests)  # nothing is sent late
        raise

    def send_late():
        for sender, count, final in post:
            try:
                send(sender, count, final, 2000)
            except pb_utils.TritonModelException as e:
                pb_utils.Logger.log_info(f"send raised: {e}")
        done(requests)

    later(send_late, files)
    return None if all(r is None for r in returned) else returned
