# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Answers with its process id. MODE picks how execute() fails:
"die" SIGKILL (as the OOM killer does), "exit" os._exit(3), "segv" a null
read through ctypes, "oom" an allocation past a lowered RLIMIT_AS (a
MemoryError, not a crash), "hog" touches 2 GiB (under a memory cgroup
limit: the kernel's OOM killer ends the stub), "hang" sleeps 1 hour, "slow" 50 ms, "tenth" 100 ms, "long" 600 ms,
"forge_arena"/"forge_overflow" send the backend a frame whose body lies
outside any arena the stub owns."""

import array
import ctypes
import fcntl
import os
import resource
import signal
import socket
import struct
import time

import numpy as np
import triton_python_backend_utils as pb_utils

STUB_FD = 3  # the stub's end of the socket (docs/protocol.md, Transport)
ARENA = 4
RESPONSES = 6
BODY_IN_ARENA = 1


def send(frame: bytes, fds: list[int] = ()) -> None:
    sock = socket.socket(fileno=os.dup(STUB_FD))
    try:
        sock.sendmsg(
            [frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        )
    finally:
        sock.close()


def header(kind: int, flags: int, body_len: int) -> bytes:
    return struct.pack("<IBBHQII", 0x31595054, 1, kind, flags, 0, body_len, 0)


def forge(arena_id: int, offset: int, body_len: int) -> None:
    """A RESPONSES frame whose body is said to lie in a stub arena
    (docs/protocol.md: Header, BODY_IN_ARENA)."""
    send(header(RESPONSES, BODY_IN_ARENA, body_len) + struct.pack("<IIQ", arena_id, 0, offset))


def own_arena(arena_id: int, size: int) -> None:
    """Announces a real, sealed memfd arena, as the stub does."""
    fd = os.memfd_create("forged", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    send(header(ARENA, 0, 16) + struct.pack("<IIQ", arena_id, 0, size), [fd])
    os.close(fd)


def out_of_memory() -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize"))
    resource.setrlimit(resource.RLIMIT_AS, ((vm << 10) + (64 << 20), hard))
    try:
        np.ones(1 << 30, np.uint8)  # 1 GiB past a 64 MiB headroom
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return "allocated"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = request.inputs()[0].as_numpy()[0].decode()
            if mode == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            elif mode == "exit":
                os._exit(3)
            elif mode == "segv":
                ctypes.string_at(0)
            elif mode == "oom":
                out_of_memory()
            elif mode == "hog":
                np.ones(2 << 30, np.uint8)
            elif mode == "hang":
                pb_utils.Logger.log_info(f"crash: {request.request_id()} hangs in execute")
                time.sleep(3600)
            elif mode == "slow":
                time.sleep(0.05)
            elif mode == "tenth":
                time.sleep(0.1)
            elif mode == "long":
                time.sleep(0.6)
            elif mode == "forge_arena":
                forge(0xFFFF, 0, 64)  # no such arena
                time.sleep(3600)  # until the backend kills the stub
            elif mode == "forge_overflow":
                own_arena(0x7000, 4096)
                forge(0x7000, (1 << 64) - 8, 1 << 16)  # offset + length wraps
                time.sleep(3600)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))]
                )
            )
        return responses
