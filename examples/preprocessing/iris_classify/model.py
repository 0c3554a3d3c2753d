# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""iris_classify: the second step of the preprocessing ensemble. A
nearest-centroid classifier over standardised iris measurements: LABEL is
the species whose mean lies closest, DISTANCE how far it is."""

import numpy as np
import triton_python_backend_utils as pb_utils

SPECIES = np.array([b"setosa", b"versicolor", b"virginica"], dtype=object)
# Species means, standardised as iris_preprocess standardises its input.
CENTROIDS = np.array(
    [[-1.015, 0.855, -1.305, -1.254], [0.113, -0.661, 0.285, 0.167], [0.903, -0.191, 1.020, 1.088]],
    np.float32,
)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            dist = np.linalg.norm(x[:, None, :] - CENTROIDS[None, :, :], axis=2)
            nearest = dist.argmin(axis=1)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("LABEL", SPECIES[nearest]),
                        pb_utils.Tensor(
                            "DISTANCE", dist[np.arange(len(x)), nearest].astype(np.float32)
                        ),
                    ]
                )
            )
        return responses
