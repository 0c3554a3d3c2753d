# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The model loading API: OP load / load_files / unload / ready on model
NAME; answers whether NAME is ready afterwards. load_files sends CONFIG and
FILE (the text of a model.py) as the model's files."""

import numpy as np
import triton_python_backend_utils as pb_utils


def text(request, name):
    t = pb_utils.get_input_tensor_by_name(request, name)
    return t.as_numpy().reshape(-1)[0].decode() if t is not None else ""


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            op, name = text(r, "OP"), text(r, "NAME")
            try:
                if op == "load":
                    pb_utils.load_model(name)
                elif op == "load_files":
                    pb_utils.load_model(
                        name,
                        config=text(r, "CONFIG"),
                        files={"file:1/model.py": text(r, "FILE").encode()},
                    )
                elif op == "unload":
                    pb_utils.unload_model(name)
                ready = pb_utils.is_model_ready(name)
            except pb_utils.TritonModelException as e:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))))
                continue
            out.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("READY", np.array([ready], bool))])
            )
        return out
