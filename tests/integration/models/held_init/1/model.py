# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""An initialize() that waits on a condition for an engine thread it
started, which creates metrics, logs and asks the model loading API (the
shape of vllm_backend's model.py), then checks the answers."""

import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.ready = threading.Condition()
        self.state = None

        def engine():
            try:
                family = pb_utils.MetricFamily(
                    name="held_init_engine_steps",
                    description="steps of the engine thread",
                    kind=pb_utils.MetricFamily.GAUGE,
                )
                gauge = family.Metric(labels={"model": "held_init"})
                gauge.set(7)
                pb_utils.Logger.log_info("held_init engine thread: metric created")
                state = ("ok", gauge.value(), pb_utils.is_model_ready("add_sub"))
            except Exception as e:  # the condition must be notified either way
                state = ("failed", repr(e), False)
            with self.ready:
                self.state = state
                self.ready.notify_all()

        threading.Thread(target=engine, daemon=True).start()
        with self.ready:
            self.ready.wait_for(lambda: self.state is not None, timeout=60)
        if self.state is None or self.state[0] != "ok" or self.state[1] != 7:
            raise RuntimeError(f"the engine thread did not get through: {self.state}")
        self.add_sub_ready = self.state[2]

    def execute(self, requests):
        started = np.array([self.add_sub_ready])
        return [pb_utils.InferenceResponse([pb_utils.Tensor("STARTED", started)]) for _ in requests]
