# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Custom metrics per request. MODE:
  "update": counter += VALUE, gauge = VALUE, histogram observes VALUE;
  "value":  the counter's and the gauge's value() as JSON;
  "errors": every misuse tried, the error messages as JSON;
  "temp":   a family and metric made, incremented by VALUE and dropped;
  "burst":  VALUE increments and VALUE observations, timed;
  "pid":    the stub's pid; "die": the stub kills itself.
The families are created in initialize(); a gauge labelled with the stub's
pid shows which stub made it."""

import json
import os
import signal
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"], "origin": "test"}
        self.requests = pb_utils.MetricFamily(
            "tritonpy_test_requests_total", "requests seen", pb_utils.MetricFamily.COUNTER
        ).Metric(labels)
        self.last = pb_utils.MetricFamily(
            "tritonpy_test_last_value", "last VALUE", pb_utils.MetricFamily.GAUGE
        ).Metric(labels)
        self.hist = pb_utils.MetricFamily(
            "tritonpy_test_value", "VALUE distribution", pb_utils.MetricFamily.HISTOGRAM
        ).Metric(labels, buckets=[1.0, 10.0, 100.0])
        self.stub = pb_utils.MetricFamily(
            "tritonpy_test_stub", "one series per stub process", pb_utils.MetricFamily.GAUGE
        ).Metric({"model": args["model_name"], "pid": str(os.getpid())})
        self.stub.set(1)

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            value = float(pb_utils.get_input_tensor_by_name(request, "VALUE").as_numpy()[0])
            if mode == "update":
                self.requests.increment(value)
                self.last.set(value)
                self.hist.observe(value)
                out = "ok"
            elif mode == "value":
                out = json.dumps({"requests": self.requests.value(), "last": self.last.value()})
            elif mode == "temp":
                temp = pb_utils.MetricFamily(
                    "tritonpy_test_temp", "dropped at once", pb_utils.MetricFamily.COUNTER
                ).Metric({"model": "temp"})
                temp.increment(value)
                out = json.dumps({"temp": temp.value()})
            elif mode == "burst":
                n = int(value)
                start = time.perf_counter()
                for _ in range(n):
                    self.requests.increment(1)
                inc = time.perf_counter() - start
                start = time.perf_counter()
                for i in range(n):
                    self.hist.observe(i % 200)
                obs = time.perf_counter() - start
                out = json.dumps({"increment_ns": inc / n * 1e9, "observe_ns": obs / n * 1e9})
            elif mode == "errors":
                out = json.dumps(self._errors())
            elif mode == "pid":
                out = str(os.getpid())
            elif mode == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            else:
                raise ValueError(f"unknown MODE {mode}")
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([out.encode()], dtype=object))]
                )
            )
        return responses

    def _errors(self):
        attempts = {
            "counter_negative": lambda: self.requests.increment(-1),
            "counter_set": lambda: self.requests.set(5),
            "counter_observe": lambda: self.requests.observe(1),
            "gauge_observe": lambda: self.last.observe(1),
            "histogram_increment": lambda: self.hist.increment(1),
            "histogram_set": lambda: self.hist.set(1),
            "histogram_value": lambda: self.hist.value(),
            "histogram_no_buckets": lambda: pb_utils.MetricFamily(
                "tritonpy_test_value", "VALUE distribution", pb_utils.MetricFamily.HISTOGRAM
            ).Metric({"x": "y"}),
            "counter_buckets": lambda: pb_utils.MetricFamily(
                "tritonpy_test_requests_total", "requests seen", pb_utils.MetricFamily.COUNTER
            ).Metric({}, buckets=[1.0]),
            "label_not_str": lambda: pb_utils.MetricFamily(
                "tritonpy_test_requests_total", "requests seen", pb_utils.MetricFamily.COUNTER
            ).Metric({"n": 1}),
            "bad_kind": lambda: pb_utils.MetricFamily("tritonpy_test_x", "x", 7),
            "kind_clash": lambda: pb_utils.MetricFamily(
                "tritonpy_test_requests_total", "requests seen", pb_utils.MetricFamily.GAUGE
            ),
        }
        out = {}
        for name, attempt in attempts.items():
            try:
                attempt()
            except pb_utils.TritonModelException as e:
                out[name] = str(e)
            else:
                out[name] = None
        return out
