# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Could batch 8 rows; its config.pbtxt asks for at most 2, which stands.
auto_complete_config leaves a file beside this one when it runs."""

from pathlib import Path

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        (Path(__file__).parent / "auto_complete_called").write_text("yes")
        auto_complete_model_config.add_input({"name": "IN", "data_type": "TYPE_INT32", "dims": [1]})
        auto_complete_model_config.set_max_batch_size(8)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() + 1)]
            )
            for r in requests
        ]
