# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Doubles its input and reports three custom metrics, shown at Triton's
metrics endpoint (port 8002, /metrics) next to Triton's own:

- custom_metrics_requests_total   a counter of requests,
- custom_metrics_last_size        a gauge: elements in the last request,
- custom_metrics_latency_seconds  a histogram of the time spent per request.

Each update is in the server when the call returns (a round trip to the
backend, as on the official backend): fine once per request; a model that
would update per token or per item adds up first and updates once per batch.
"""

import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"]}
        requests = pb_utils.MetricFamily(
            "custom_metrics_requests_total",
            "Requests handled by the model",
            pb_utils.MetricFamily.COUNTER,
        )
        size = pb_utils.MetricFamily(
            "custom_metrics_last_size", "Elements in the last request", pb_utils.MetricFamily.GAUGE
        )
        latency = pb_utils.MetricFamily(
            "custom_metrics_latency_seconds",
            "Time spent per request",
            pb_utils.MetricFamily.HISTOGRAM,
        )
        # Held as long as their metrics: the official backend invalidates
        # the metrics of a family that is garbage-collected.
        self.families = (requests, size, latency)
        self.requests = requests.Metric(labels)
        self.size = size.Metric(labels)
        self.latency = latency.Metric(labels, buckets=[1e-5, 1e-4, 1e-3, 1e-2])

    def execute(self, requests):
        responses = []
        for request in requests:
            start = time.perf_counter()
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x * 2).astype(np.float32))])
            )
            self.requests.increment(1)
            self.size.set(x.size)
            self.latency.observe(time.perf_counter() - start)
        return responses
