# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""auto_complete_nobatch: a list of words in, the words in capitals and
their lengths out. No batching.

This model has no config.pbtxt at all. Triton sees a ``model.py`` in the
version directory and gives the model to the backend named ``python``
(tritonpy installed under that name, or the official backend); the
model's ``auto_complete_config`` then declares everything Triton needs.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        config = auto_complete_model_config
        # as_dict() shows what Triton already knows, e.g. from a config.pbtxt.
        known = {tensor["name"] for tensor in config.as_dict()["input"]}
        if "WORDS" not in known:
            config.add_input({"name": "WORDS", "data_type": "TYPE_STRING", "dims": [-1]})
        config.add_output({"name": "UPPER", "data_type": "TYPE_STRING", "dims": [-1]})
        config.add_output({"name": "LENGTHS", "data_type": "TYPE_INT32", "dims": [-1]})
        config.set_max_batch_size(0)
        return config

    def execute(self, requests):
        responses = []
        for request in requests:
            words = [
                w.decode() for w in pb_utils.get_input_tensor_by_name(request, "WORDS").as_numpy()
            ]
            upper = np.array([w.upper().encode() for w in words], dtype=object)
            lengths = np.array([len(w) for w in words], dtype=np.int32)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("UPPER", upper), pb_utils.Tensor("LENGTHS", lengths)]
                )
            )
        return responses
