# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""iris_preprocess: the first step of the preprocessing ensemble.

Each element of ROWS is a text line of four measurements of an iris flower
("5.1, 3.5, 1.4, 0.2": sepal length and width, petal length and width, in
cm). They are parsed and standardised with the data set's mean and
standard deviation into FEATURES, one row per line. A line that does not
hold four numbers fails the request with a message naming it.
"""

import numpy as np
import triton_python_backend_utils as pb_utils

MEAN = np.array([5.843, 3.057, 3.758, 1.199], np.float32)
STD = np.array([0.825, 0.434, 1.759, 0.760], np.float32)


def parse(rows):
    features = np.empty((len(rows), 4), np.float32)
    for i, raw in enumerate(rows):
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
        try:
            values = [float(v) for v in text.replace(";", ",").split(",")]
        except ValueError:
            values = []
        if len(values) != 4:
            raise ValueError(f"row {i} ({text!r}) is not four comma-separated numbers")
        features[i] = values
    return (features - MEAN) / STD


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            rows = pb_utils.get_input_tensor_by_name(request, "ROWS").as_numpy().reshape(-1)
            try:
                features = parse(rows)
            except ValueError as exc:
                err = pb_utils.TritonError(
                    f"iris_preprocess: {exc}", pb_utils.TritonError.INVALID_ARG
                )
                responses.append(pb_utils.InferenceResponse(error=err))
                continue
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("FEATURES", features)]))
        return responses
