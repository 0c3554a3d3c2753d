# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Custom metrics per request. MODE:
  "update": counter += VALUE, gauge = VALUE, histogram observes VALUE;
  "value":  the counter's and the gauge's value() as JSON;
  "errors": every misuse tried, the error messages as JSON;
  "temp":   a family and metric made, incremented by VALUE and dropped;
  "burst":  VALUE increments and VALUE observations, timed;
  "pid":    the stub's pid; "die": the stub kills itself;
  "scrape": observes VALUE, then scrapes the metrics endpoint itself (its
            port in PORT) and answers the histogram's count it found;
  "orphan": a metric used after its family was dropped, the errors as JSON;
  "steal":  tries the "metrics" model's series, and the name of a family
            only it made with another description, the errors as JSON;
  "fill":   makes gauges, then families, until a cap refuses one; answers
            how many it made and the errors as JSON.
The families are created in initialize(); a gauge labelled with the stub's
pid shows which stub made it."""

import json
import os
import signal
import time
import urllib.request

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]
        labels = {"model": args["model_name"], "origin": "test"}
        # The families are kept: a collected family takes its metrics with it.
        self.families = [
            pb_utils.MetricFamily(
                "tritonpy_test_requests_total", "requests seen", pb_utils.MetricFamily.COUNTER
            ),
            pb_utils.MetricFamily(
                "tritonpy_test_last_value", "last VALUE", pb_utils.MetricFamily.GAUGE
            ),
            pb_utils.MetricFamily(
                "tritonpy_test_value", "VALUE distribution", pb_utils.MetricFamily.HISTOGRAM
            ),
            pb_utils.MetricFamily(
                "tritonpy_test_stub", "one series per stub process", pb_utils.MetricFamily.GAUGE
            ),
        ]
        requests, last, hist, stub = self.families
        self.families.append(
            pb_utils.MetricFamily(
                f"tritonpy_test_own_{self.name}",
                "a family of one model",
                pb_utils.MetricFamily.GAUGE,
            )
        )
        self.requests = requests.Metric(labels)
        self.last = last.Metric(labels)
        self.hist = hist.Metric(labels, buckets=[1.0, 10.0, 100.0])
        self.stub = stub.Metric({"model": args["model_name"], "pid": str(os.getpid())})
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
                temp_family = pb_utils.MetricFamily(
                    "tritonpy_test_temp", "dropped at once", pb_utils.MetricFamily.COUNTER
                )
                temp = temp_family.Metric({"model": "temp"})
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
            elif mode == "scrape":
                self.hist.observe(value)
                port = int(pb_utils.get_input_tensor_by_name(request, "PORT").as_numpy()[0])
                out = json.dumps(self._scraped_count(port))
            elif mode == "orphan":
                out = json.dumps(self._orphan())
            elif mode == "steal":
                out = json.dumps(self._steal())
            elif mode == "fill":
                out = json.dumps(self._fill())
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
        return _raised(attempts)

    def _scraped_count(self, port):
        """This model's histogram count, as the endpoint shows it now."""
        url = f"http://localhost:{port}/metrics"
        with urllib.request.urlopen(url, timeout=60) as r:
            text = r.read().decode()
        for line in text.splitlines():
            if line.startswith("tritonpy_test_value_count{") and f'model="{self.name}"' in line:
                return float(line.rsplit(" ", 1)[1])
        return None

    def _orphan(self):
        family = pb_utils.MetricFamily(
            "tritonpy_test_orphan", "used after its family", pb_utils.MetricFamily.GAUGE
        )
        metric = family.Metric({"model": self.name})
        metric.set(1)
        del family
        return _raised(
            {
                "increment": lambda: metric.increment(1),
                "set": lambda: metric.set(2),
                "value": lambda: metric.value(),
            }
        )

    def _steal(self):
        return _raised(
            {
                "series": self._take_metrics_series,
                "description": lambda: pb_utils.MetricFamily(
                    "tritonpy_test_own_metrics", "not the same", pb_utils.MetricFamily.GAUGE
                ),
            }
        )

    def _take_metrics_series(self):
        family = pb_utils.MetricFamily(
            "tritonpy_test_requests_total", "requests seen", pb_utils.MetricFamily.COUNTER
        )
        family.Metric({"model": "metrics", "origin": "test"}).increment(1000)

    def _fill(self):
        family = pb_utils.MetricFamily(
            "tritonpy_test_fill", "one gauge per label", pb_utils.MetricFamily.GAUGE
        )
        made, families, out = [], [], {}
        try:
            for i in range(100000):
                made.append(family.Metric({"i": str(i)}))
        except pb_utils.TritonModelException as e:
            out["series_error"] = str(e)
        out["series"] = len(made)
        try:
            for i in range(100000):
                families.append(
                    pb_utils.MetricFamily(
                        f"tritonpy_test_fill_{i}", "x", pb_utils.MetricFamily.GAUGE
                    )
                )
        except pb_utils.TritonModelException as e:
            out["families_error"] = str(e)
        out["families"] = len(families)
        return out


def _raised(attempts):
    """name -> the TritonModelException text each attempt raised (None: it
    did not raise)."""
    out = {}
    for name, attempt in attempts.items():
        try:
            attempt()
        except pb_utils.TritonModelException as e:
            out[name] = str(e)
        else:
            out[name] = None
    return out
