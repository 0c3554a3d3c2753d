# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Hostile model code against the backend's sends and model-control
worker (tests/integration/test_hostile_barriers.py). MODE picks:

"ok": answers with its process id.
"stall": holds the GIL so that nothing in the stub reads its socket
again, then forges many BLS_REQUEST frames to add_sub: add_sub's responses
pile up for a stub that never takes them.
"flood": forges MODEL_CONTROL frames that load hostile_barriers_slow (its
initialize takes seconds), far more than the backend keeps in flight.
"bls": one BLS call to add_sub (the fault-injection tests).
"""

import ctypes
import errno
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.environ["TRITONPY_TESTS_DIR"])
import hostile  # noqa: E402

ref = hostile.ref
FP32 = 11  # TRITONSERVER_TYPE_FP32
FORGED_IDS = 1 << 40  # far from the stub's own call ids


def send_holding_the_gil(frames: list[bytes]) -> None:
    """Writes `frames` (as hostile.send does) and then sleeps two minutes, never
    letting another thread of the stub run: libc's send and sleep through
    PyDLL keep the GIL, and the switch interval keeps the interpreter from
    handing it over between them. (hostile.send releases the GIL in
    sendmsg, so the stub would read the first answers.)"""
    sys.setswitchinterval(1e6)
    libc = ctypes.PyDLL(None, use_errno=True)
    for frame in frames:
        # The stub's socket is non-blocking: a full one is tried again.
        while libc.send(hostile.STUB_FD, frame, len(frame), 0) < 0:
            if ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
                raise OSError(ctypes.get_errno(), "send")
    libc.sleep(120)  # bounded: never outlives a failed test for long


def forged_bls_requests(count: int) -> list[bytes]:
    data = np.ones(4, np.float32).tobytes()
    inputs = [ref.inline("INPUT0", FP32, [4], data), ref.inline("INPUT1", FP32, [4], data)]
    body = {
        "model_name": "add_sub",
        "model_version": -1,
        "trace_batch_id": 0,
        "trace_request_index": 0,
        "request": ref.request("forged", inputs),
    }
    return [ref.encode(ref.BLS_REQUEST, body, id=FORGED_IDS + i) for i in range(count)]


def forged_model_control(count: int) -> list[bytes]:
    body = {"json": {"op": "load", "model_name": "hostile_barriers_slow"}}
    return [ref.encode(ref.MODEL_CONTROL, body, id=FORGED_IDS + i) for i in range(count)]


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            mode = request.inputs()[0].as_numpy().reshape(-1)[0].decode()
            if mode == "stall":
                send_holding_the_gil(forged_bls_requests(8000))
            elif mode == "flood":
                send_holding_the_gil(forged_model_control(1000))
            elif mode == "bls":
                data = np.ones(4, np.float32)
                r = pb_utils.InferenceRequest(
                    model_name="add_sub",
                    inputs=[pb_utils.Tensor("INPUT0", data), pb_utils.Tensor("INPUT1", data)],
                    requested_output_names=["OUTPUT0"],
                ).exec()
                if r.has_error():
                    raise pb_utils.TritonModelException(r.error().message())
            out.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))]
                )
            )
        return out
