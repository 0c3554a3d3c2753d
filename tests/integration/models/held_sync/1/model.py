# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A plain def execute that keeps the loop thread (time.sleep) while it
polls request.is_cancelled(), and meanwhile has a thread of its own use
pb_utils: a BLS call, a metric, a log line. What it saw goes to the log."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.family = pb_utils.MetricFamily(
            name="held_sync_thread_calls",
            description="calls made by a thread while execute held the loop",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.logger = pb_utils.Logger

    def execute(self, requests):
        out = []
        for request in requests:
            tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()[0].decode()
            if tag.startswith("cancel"):
                out.append(self._until_cancelled(request, tag))
            else:
                out.append(self._thread_calls(tag))
        return out

    def _until_cancelled(self, request, tag):
        self.logger.log_info(f"held_sync {tag}: waiting")
        deadline = time.monotonic() + 60
        while not request.is_cancelled() and time.monotonic() < deadline:
            time.sleep(0.02)
        seen = request.is_cancelled()
        self.logger.log_info(f"held_sync {tag}: cancelled={seen}")
        return pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", np.array([seen]))])

    def _thread_calls(self, tag):
        done = {}

        def work():
            metric = self.family.Metric(labels={"tag": tag})
            metric.increment(1)
            add = pb_utils.InferenceRequest(
                model_name="add_sub",
                inputs=[
                    pb_utils.Tensor("INPUT0", np.ones(4, np.float32)),
                    pb_utils.Tensor("INPUT1", np.ones(4, np.float32)),
                ],
                requested_output_names=["OUTPUT0"],
            ).exec()
            total = pb_utils.get_output_tensor_by_name(add, "OUTPUT0").as_numpy()
            self.logger.log_info(f"held_sync {tag}: thread sum={total.sum():g}")
            done["ok"] = not add.has_error() and metric.value() == 1

        t = threading.Thread(target=work)
        t.start()
        t.join(60)  # the loop thread waits here, in model code
        seen = bool(done.get("ok"))
        return pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", np.array([seen]))])
