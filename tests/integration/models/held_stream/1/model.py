# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A decoupled plain def execute: a thread sends the first response while
execute keeps the loop thread, polling sender.is_cancelled() until the
client, having that response, cancels the stream."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()

            def first(sender=sender):
                sender.send(
                    pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], np.int32))])
                )

            t = threading.Thread(target=first)
            t.start()
            t.join()
            deadline = time.monotonic() + 60
            while not sender.is_cancelled() and time.monotonic() < deadline:
                time.sleep(0.02)
            pb_utils.Logger.log_info(f"held_stream: cancelled={sender.is_cancelled()}")
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
