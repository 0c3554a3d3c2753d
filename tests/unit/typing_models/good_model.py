# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A model that uses the API the way its types say; mypy --strict passes."""

from __future__ import annotations

import json

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config: pb_utils.ModelConfig) -> pb_utils.ModelConfig:
        config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [-1]})
        config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [-1]})
        config.set_max_batch_size(max(config.max_batch_size(), 4))
        config.set_dynamic_batching()
        config.set_model_transaction_policy({"decoupled": False})
        inputs: list[dict[str, object]] = config.as_dict()["input"]
        pb_utils.Logger.log_info(f"{len(inputs)} inputs")
        return config

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        pb_utils.Logger.log_info(f"decoupled={self.decoupled}")
        pb_utils.Logger.log("verbose", pb_utils.LogLevel.VERBOSE)

    def execute(
        self, requests: list[pb_utils.InferenceRequest]
    ) -> list[pb_utils.InferenceResponse]:
        responses = []
        for request in requests:
            t = pb_utils.get_input_tensor_by_name(request, "IN")
            x = np.zeros(1, np.float32) if t is None else t.as_numpy()
            sender: pb_utils.InferenceResponseSender = request.get_response_sender()
            if request.is_cancelled() or sender.is_cancelled():
                err = pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)
                responses.append(pb_utils.InferenceResponse(error=err))
                continue
            inner = pb_utils.InferenceRequest(
                model_name="other",
                inputs=[pb_utils.Tensor("IN", x)],
                requested_output_names=["OUT"],
                parameters={"k": 1},
            )
            answer: pb_utils.InferenceResponse = inner.exec()
            for part in inner.exec(decoupled=True):
                answer = part
            out = pb_utils.get_output_tensor_by_name(answer, "OUT")
            tensors = [] if out is None else [pb_utils.Tensor("OUT", out.as_numpy())]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses

    async def stream(self, request: pb_utils.InferenceRequest) -> None:
        inner = pb_utils.InferenceRequest(
            model_name="other", inputs=request.inputs(), requested_output_names=[]
        )
        first: pb_utils.InferenceResponse = await inner.async_exec()
        sender = request.get_response_sender()
        sender.send(first)
        async for part in await inner.async_exec(decoupled=True):
            sender.send(part)
        sender.send(flags=FINAL)

    def finalize(self) -> None:
        pass
