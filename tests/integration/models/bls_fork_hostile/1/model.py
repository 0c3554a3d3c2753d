# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Forges BLS_CHANNEL frames through the stub's socket (tests/hostile.py),
as a forked child would send them, and answers in JSON what the backend
did with each channel. "flood:N" opens N channels at once and answers the
indices of those the backend closed (it keeps at most 64 open), keeping
the rest open until "close"; "garbage" opens one channel and writes a
frame with a bad magic on it, and answers the frame types read back until
the backend closed it; "pid" answers the stub's process id."""

import json
import os
import select
import socket
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.environ["TRITONPY_TESTS_DIR"])
import hostile  # noqa: E402

ref = hostile.ref
KEPT = []
WAIT = 60.0  # at most, for what the backend does to come


def open_channel():
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    hostile.send(ref.encode(ref.BLS_CHANNEL, {}), [theirs.fileno()])
    theirs.close()
    return mine


def flood(n):
    """Opens n channels; answers the indices the backend closed, once n - 64
    of them are (or WAIT passed)."""
    ends = [open_channel() for _ in range(n)]
    closed = set()
    deadline = time.monotonic() + WAIT
    while len(closed) < n - 64 and time.monotonic() < deadline:
        waiting = [s for i, s in enumerate(ends) if i not in closed]
        ready, _, _ = select.select(waiting, [], [], 1.0)
        for s in ready:
            if s.recv(65536) == b"":
                closed.add(ends.index(s))
    # And none of the others, looked at once more.
    ready, _, _ = select.select([s for i, s in enumerate(ends) if i not in closed], [], [], 0.2)
    closed.update(ends.index(s) for s in ready)
    KEPT.extend(ends)
    return sorted(closed)


def garbage():
    s = open_channel()
    s.send(b"\xff" * 24)
    types = []
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if not select.select([s], [], [], 1.0)[0]:
            continue
        frame = s.recv(1 << 17)
        if not frame:
            s.close()
            return {"types": types, "eof": True}
        types.append(ref.TYPE_NAMES.get(frame[5], frame[5]) if len(frame) > 5 else "short")
    return {"types": types, "eof": False}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = request.inputs()[0].as_numpy()[0].decode()
            if mode.startswith("flood:"):
                answer = flood(int(mode[6:]))
            elif mode == "close":
                for s in KEPT:
                    s.close()
                answer = len(KEPT)
                KEPT.clear()
            elif mode == "garbage":
                answer = garbage()
            elif mode == "pid":
                answer = os.getpid()
            else:
                raise ValueError(f"unknown mode {mode}")
            out = np.array([json.dumps(answer).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("ANSWER", out)]))
        return responses
