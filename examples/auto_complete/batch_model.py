# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""auto_complete_batch: rows of two 3-vectors in, per row their dot product
and their element-wise maximum out. Batches up to 16 rows.

Its config.pbtxt says little more than which backend to use: the model
declares its inputs, outputs, batch size and dynamic batcher itself, in
``auto_complete_config``, which runs once when the model loads (unless
tritonserver runs with ``--disable-auto-complete-config``). A config.pbtxt
may still set any of these; the model then checks that they agree with what
it can do, and the load fails with the reason if they do not.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

ROW = 3


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        config = auto_complete_model_config
        for name in ("A", "B"):
            config.add_input({"name": name, "data_type": "TYPE_FP32", "dims": [ROW]})
        config.add_output({"name": "DOT", "data_type": "TYPE_FP32", "dims": [1]})
        config.add_output({"name": "MAX", "data_type": "TYPE_FP32", "dims": [ROW]})
        # The most rows the model takes at once; a config.pbtxt may ask for
        # fewer. With a batch size, the dynamic batcher can gather requests.
        config.set_max_batch_size(16)
        config.set_dynamic_batching()
        return config

    def initialize(self, args):
        config = json.loads(args["model_config"])
        pb_utils.Logger.log_info(
            f"{args['model_name']}: batches up to {config['max_batch_size']} rows"
        )

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B").as_numpy()
            dot = np.einsum("ij,ij->i", a, b).astype(np.float32).reshape(-1, 1)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("DOT", dot), pb_utils.Tensor("MAX", np.maximum(a, b))]
                )
            )
        return responses
