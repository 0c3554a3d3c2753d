# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A stateful model: a running sum of X per sequence (correlation id),
started by the START flag and forgotten after the END flag. A request of a
sequence it does not know is an error."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            seq = request.correlation_id()
            flags = request.flags()
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            shape = x.shape
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                self.sums[seq] = 0
            if seq not in self.sums:
                responses.append(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError(f"sequence {seq} was never started")
                    )
                )
                continue
            self.sums[seq] += int(x.reshape(-1)[0])
            total = self.sums[seq]
            if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
                del self.sums[seq]
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("SUM", np.full(shape, total, np.int32)),
                        pb_utils.Tensor("CORRID", np.full(shape, seq, np.uint64)),
                    ]
                )
            )
        return responses
