# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Passes text taken from tensors (bytes in object arrays, numpy.bytes_
and numpy.str_ scalars) wherever the API takes a str, as models written
for the official backend do: its BLS example names the model to call with
the first element of a BYTES input. Each answer is the value or the error
it raised."""

import functools
import json

import numpy as np
import triton_python_backend_utils as pb_utils

OUTPUTS = ["OUTPUT0", "OUTPUT1"]


def probe(get):
    try:
        return get()
    except Exception as e:  # noqa: BLE001 - the test reads what went wrong
        return f"{type(e).__name__}: {e}"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            model, names, in0, in1 = (
                pb_utils.get_input_tensor_by_name(request, n).as_numpy()
                for n in ("MODEL_NAME", "OUTPUT_NAMES", "INPUT0", "INPUT1")
            )
            # The official BLS example's call: the model name is bytes.
            outputs = probe(functools.partial(self.call, model[0], in0, in1))
            info = {"bls": outputs if isinstance(outputs, str) else "ok"}
            if isinstance(outputs, str):
                outputs = [pb_utils.Tensor(n, np.zeros(4, np.float32)) for n in OUTPUTS]
            info.update(self.checks(model[0], list(names), in0, in1))
            outputs = [
                *outputs,
                pb_utils.Tensor("INFO", np.array([json.dumps(info, default=repr)], np.str_)),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses

    def call(self, model_name, in0, in1):
        answer = pb_utils.InferenceRequest(
            model_name=model_name,
            requested_output_names=OUTPUTS,
            inputs=[pb_utils.Tensor("INPUT0", in0), pb_utils.Tensor("INPUT1", in1)],
        ).exec()
        if answer.has_error():
            raise pb_utils.TritonModelException(answer.error().message())
        return answer.output_tensors()

    def checks(self, model_name, names, in0, in1):
        """The other text parameters, one at a time."""

        def request_id():
            rid = pb_utils.InferenceRequest(
                model_name=np.str_("add_sub"),
                requested_output_names=[],
                inputs=[],
                request_id=np.bytes_(b"text-args-call"),
            ).request_id()
            return [type(rid).__name__, rid]

        def requested():
            r = pb_utils.InferenceRequest(
                model_name="add_sub", requested_output_names=names, inputs=[]
            )
            return sorted(r.requested_output_names())

        def tensor_names():
            return [
                pb_utils.Tensor(np.bytes_(b"A"), in0).name(),
                pb_utils.Tensor(b"B", in0.astype(np.float64)).name(),
                pb_utils.Tensor.from_dlpack(np.str_("C"), in1).name(),
            ]

        return {
            "request_id": probe(request_id),
            "requested": probe(requested),
            "tensor_names": probe(tensor_names),
            "error": probe(lambda: pb_utils.TritonError(np.bytes_(b"from bytes")).message()),
            "log": probe(
                lambda: pb_utils.Logger.log_info(np.bytes_(b"text_args: called ") + model_name)
            ),
            "ready": probe(lambda: pb_utils.is_model_ready(model_name, np.bytes_(b"1"))),
            "metric": probe(self.count),
        }

    def count(self):
        """A counter whose family has a numpy.str_ name and a bytes
        description, and numpy.str_ labels (both kept: a collected family
        takes its metrics with it, and a collected metric leaves the
        endpoint)."""
        if not hasattr(self, "calls"):
            family = pb_utils.MetricFamily(
                name=np.str_("text_args_calls"),
                description=b"calls of text_args",
                kind=pb_utils.MetricFamily.COUNTER,
            )
            self.calls_family = family
            self.calls = family.Metric(labels={np.str_("origin"): np.str_("tensor")})
        self.calls.increment(1)
        return "ok"
