# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Answers with its process id, after forging what MODE names through the
stub's socket (tests/hostile.py): more arenas than the backend allows
("arenas"), an arena larger than all a stub may map ("arena_bytes"), a
4 GiB frame body in an arena ("body"), a BLS request whose inputs add up to
300 GiB ("bls"), a memfd shrunk after it was announced unsealed
("unsealed"), a hugetlbfs memfd ("hugetlb", PID -1 when the kernel has
none), a BLS_CHANNEL frame carrying a memfd ("channel_memfd") or a unix
stream socket ("channel_stream"), a LOG frame carrying a SEQPACKET socket
("socket_on_log"). "ok" forges nothing, and "big:<n>" neither: it answers with n
bytes (the process id repeated), an honest output the stub must keep
within the backend's limits. Every forgery should get the stub killed
before execute returns."""

import fcntl
import mmap
import os
import socket
import struct
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.environ["TRITONPY_TESTS_DIR"])
import hostile  # noqa: E402

ref = hostile.ref
FIRST_ID = 0x10000  # far from the stub's own arena ids
KEPT = []  # this side of the sockets passed (the stub dies holding them)


def memfd(size: int, *, seal: bool = True, flags: int = 0) -> int:
    fd = os.memfd_create("hostile-limits", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING | flags)
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


def announce(arena_id: int, size: int, fd: int) -> None:
    hostile.send(ref.encode(ref.ARENA, {"arena_id": arena_id, "size": size}), [fd])


def body_in_arena(ftype: int, arena_id: int, body_len: int) -> None:
    ref_body = {"arena_id": arena_id, "offset": 0, "body_len": body_len}
    hostile.send(ref.encode(ftype, ref_body, flags=ref.FLAG_BODY_IN_ARENA))


def forge(mode: str) -> bool:
    """Sends the forgery; False when the kernel cannot make it here."""
    if mode == "arenas":
        for i in range(4096):
            fd = memfd(4096)
            announce(FIRST_ID + i, 4096, fd)
            os.close(fd)
    elif mode == "arena_bytes":
        fd = memfd(300 << 30)  # sparse: no memory behind it
        announce(FIRST_ID, 300 << 30, fd)
        os.close(fd)
    elif mode == "body":
        # A RELEASE body of 4 GiB - 12 bytes whose count says it lists
        # 2^28 - 1 allocations: decoded, a 4 GiB vector in the server.
        n = (1 << 28) - 1
        size = 4 + 16 * n
        fd = memfd(4 << 30)
        with mmap.mmap(fd, 4096) as m:
            m[:4] = struct.pack("<I", n)
        announce(FIRST_ID, 4 << 30, fd)
        os.close(fd)
        body_in_arena(ref.RELEASE, FIRST_ID, size)
    elif mode == "bls":
        # 300 inputs that all name the same 1 GiB of one arena.
        fd = memfd(1 << 30)
        announce(FIRST_ID, 1 << 30, fd)
        os.close(fd)
        big = ref.Tensor("IN", 2, [1 << 30], 1 << 30, 1, b"", FIRST_ID, 0)
        inputs = [big.to_json() | {"name": f"IN{i}"} for i in range(300)]
        body = {
            "model_name": "add_sub",
            "model_version": -1,
            "trace_batch_id": 0,
            "trace_request_index": 0,
            "request": ref.request("bls", inputs),
        }
        hostile.send(ref.encode(ref.BLS_REQUEST, body, id=0x7777))
    elif mode == "unsealed":
        fd = memfd(1 << 20, seal=False)
        announce(FIRST_ID, 1 << 20, fd)
        os.ftruncate(fd, 0)  # what the backend maps is gone
        os.close(fd)
        body_in_arena(ref.RESPONSES, FIRST_ID, 1 << 16)
    elif mode == "hugetlb":
        try:
            fd = memfd(2 << 20, flags=os.MFD_HUGETLB)
        except OSError:
            return False
        announce(FIRST_ID, 2 << 20, fd)
        os.close(fd)
        # With no huge page to back it, reading it is a SIGBUS.
        body_in_arena(ref.RELEASE, FIRST_ID, 4 + 16)
    elif mode == "channel_memfd":
        fd = memfd(4096)
        hostile.send(ref.encode(ref.BLS_CHANNEL, {}), [fd])
        os.close(fd)
    elif mode in ("channel_stream", "socket_on_log"):
        kind = socket.SOCK_STREAM if mode == "channel_stream" else socket.SOCK_SEQPACKET
        mine, theirs = socket.socketpair(socket.AF_UNIX, kind)
        ftype, body = (
            (ref.BLS_CHANNEL, {})
            if mode == "channel_stream"
            else (
                ref.LOG,
                {"level": 0, "file": "", "line": 0, "message": "with a socket"},
            )
        )
        hostile.send(ref.encode(ftype, body), [theirs.fileno()])
        theirs.close()
        KEPT.append(mine)
    elif mode != "ok" and not mode.startswith("big:"):
        raise ValueError(f"unknown mode {mode}")
    return True


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = request.inputs()[0].as_numpy()[0].decode()
            pid, n = os.getpid(), 1
            if mode.startswith("big:"):
                n = int(mode[4:]) // 8
            elif not forge(mode):
                pid = -1
            elif mode != "ok":
                time.sleep(60)  # the backend kills the stub meanwhile
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("PID", np.full(n, pid, np.int64))])
            )
        return responses
