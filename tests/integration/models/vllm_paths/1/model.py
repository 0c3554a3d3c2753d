# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The three paths vllm_backend's model.py takes through the API, as it
takes them: auto_complete_config as a classmethod calling another
classmethod; a MetricFamily made in initialize, where an error saying
"metrics not supported" means the server runs without metrics (any other
error fails the load); request.timeout() read in execute. Answers each
request with its timeout (TIMEOUT_US) and whether its metric counted
(METRICS: 1, or 0 when metrics were not supported)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @classmethod
    def auto_complete_config(cls, auto_complete_model_config):
        cls._declare(auto_complete_model_config)
        return auto_complete_model_config

    @classmethod
    def _declare(cls, config):
        config.add_input({"name": "X", "data_type": "TYPE_INT32", "dims": [1]})
        config.add_output({"name": "TIMEOUT_US", "data_type": "TYPE_UINT64", "dims": [1]})
        config.add_output({"name": "METRICS", "data_type": "TYPE_INT32", "dims": [1]})
        config.set_max_batch_size(0)

    def initialize(self, args):
        self.counter = None
        try:
            family = pb_utils.MetricFamily(
                name="vllm_paths_requests",
                description="requests seen",
                kind=pb_utils.MetricFamily.COUNTER,
            )
            self.family = family
            self.counter = family.Metric(labels={"model": args["model_name"]})
        except pb_utils.TritonModelException as e:
            if "metrics not supported" in str(e):
                pb_utils.Logger.log_info("vllm_paths: metrics not supported")
            else:
                raise e

    def execute(self, requests):
        responses = []
        for request in requests:
            if self.counter is not None:
                self.counter.increment(1)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("TIMEOUT_US", np.array([request.timeout()], np.uint64)),
                        pb_utils.Tensor(
                            "METRICS", np.array([int(self.counter is not None)], np.int32)
                        ),
                    ]
                )
            )
        return responses
