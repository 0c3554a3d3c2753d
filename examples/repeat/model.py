# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""repeat: a decoupled model answering from a thread after execute() has
returned. Each element of IN comes back as its own response (OUT, and its
position IDX), DELAY milliseconds apart; then the final flag. A cancelled
request stops early, with a line in the server's log naming it."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def initialize(self, args):
        self.workers = []

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().copy()
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY")
            pause = float(delay.as_numpy()[0]) / 1000 if delay is not None else 0.0
            worker = threading.Thread(
                target=self._answer, args=(request, values, pause), daemon=True
            )
            worker.start()
            self.workers.append(worker)
        self.workers = [w for w in self.workers if w.is_alive()]
        return None

    def _answer(self, request, values, pause):
        sender = request.get_response_sender()
        for i, v in enumerate(values):
            if request.is_cancelled():
                pb_utils.Logger.log_info(
                    f"repeat: request '{request.request_id()}' cancelled after {i} responses"
                )
                break
            if pause:
                time.sleep(pause)
            sender.send(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUT", np.array([v], np.int32)),
                        pb_utils.Tensor("IDX", np.array([i], np.uint32)),
                    ]
                )
            )
        sender.send(flags=FINAL)

    def finalize(self):
        for w in self.workers:
            w.join(timeout=5)
