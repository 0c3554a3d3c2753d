# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A decoupled sync execute streaming N tokens 0..N-1 (with the request's ID)
in the way MODE says: 0 the final flag on the last token, 1 the tokens then
a separate empty FINAL response (the official README's pattern), 2 the
sender used from a thread of the model's own after execute returned."""

import threading

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def scalar(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0])


def token(ident, i):
    return pb_utils.InferenceResponse(
        [
            pb_utils.Tensor("ID", np.array([ident], np.int32)),
            pb_utils.Tensor("TOKEN", np.array([i], np.int32)),
        ]
    )


def send_all(sender, ident, n, separate_final):
    for i in range(n):
        sender.send(token(ident, i), flags=FINAL if i == n - 1 and not separate_final else 0)
    if separate_final or n <= 0:
        sender.send(flags=FINAL)


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            ident, n, mode = (scalar(request, k) for k in ("ID", "N", "MODE"))
            sender = request.get_response_sender()
            if mode == 2:
                threading.Thread(target=send_all, args=(sender, ident, n, False)).start()
            else:
                send_all(sender, ident, n, mode == 1)
        return None
