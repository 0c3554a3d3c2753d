# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Iterative sequence batching with request rescheduling: a request asking
for N iterations is executed N times (rescheduled N-1 times) and answers
with the iteration count; the decoupled variant also sends one response per
iteration."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
RESCHEDULE = pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE


class TritonPythonModel:
    def initialize(self, args):
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(
            json.loads(args["model_config"])
        )
        self.done = {}  # request id -> iterations so far

    def execute(self, requests):
        responses = []
        for r in requests:
            key = r.request_id()
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy().reshape(-1)[0])
            count = self.done.get(key, 0) + 1
            self.done[key] = count
            out = pb_utils.InferenceResponse(
                [pb_utils.Tensor("COUNT", np.array([[count]], np.int32))]
            )
            last = count >= n
            if last:
                del self.done[key]
            if self.decoupled:
                sender = r.get_response_sender()
                sender.send(out, flags=FINAL if last else 0)
                if not last:
                    r.set_release_flags(RESCHEDULE)
            elif last:
                responses.append(out)
            else:
                r.set_release_flags(RESCHEDULE)
                responses.append(None)
        return None if self.decoupled else responses
