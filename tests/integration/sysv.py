# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""System V shared memory segments and message queues of the test's own
IPC namespace (the host's), through glibc: what a sandboxed stub must
neither reach nor leave behind (test_sandbox_escape.py)."""

from __future__ import annotations

import ctypes
import os

_LIBC = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
IPC_EXCL = 0o2000
IPC_RMID = 0


def _checked(r: int) -> int:
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def make_segment(key: int, mode: int = 0o666) -> int:
    """A new 4 KiB segment of ``key``: its id."""
    flags = ctypes.c_int(IPC_CREAT | IPC_EXCL | mode)
    return _checked(_LIBC.shmget(ctypes.c_int(key), ctypes.c_size_t(4096), flags))


def make_queue(key: int, mode: int = 0o666) -> int:
    """A new message queue of ``key``: its id."""
    return _checked(_LIBC.msgget(ctypes.c_int(key), ctypes.c_int(IPC_CREAT | IPC_EXCL | mode)))


def segment(key: int) -> int:
    """The id of the segment of ``key``, -1 if there is none."""
    return int(_LIBC.shmget(ctypes.c_int(key), ctypes.c_size_t(0), ctypes.c_int(0)))


def remove_segment(ident: int) -> None:
    _checked(_LIBC.shmctl(ctypes.c_int(ident), ctypes.c_int(IPC_RMID), None))


def remove_queue(ident: int) -> None:
    _checked(_LIBC.msgctl(ctypes.c_int(ident), ctypes.c_int(IPC_RMID), None))
