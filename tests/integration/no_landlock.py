# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""python no_landlock.py PROGRAM ARGS...: runs PROGRAM as a kernel without
Landlock would (landlock_create_ruleset fails with ENOSYS: a seccomp
filter that it and everything it starts inherit). x86-64 and arm64, whose
numbers for the call agree."""

import ctypes
import errno
import os
import sys

LANDLOCK_CREATE_RULESET = 444
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
LOAD_NR = 0x20  # BPF_LD | BPF_W | BPF_ABS, offset 0: the call's number
JUMP_IF_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
RETURN = 0x06  # BPF_RET | BPF_K


class Instruction(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Instruction))]


def main() -> None:
    code = (Instruction * 4)(
        Instruction(LOAD_NR, 0, 0, 0),
        Instruction(JUMP_IF_EQUAL, 0, 1, LANDLOCK_CREATE_RULESET),
        Instruction(RETURN, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
        Instruction(RETURN, 0, 0, SECCOMP_RET_ALLOW),
    )
    program = Program(4, code)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(
        PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0
    ):
        sys.exit(f"no_landlock: {os.strerror(ctypes.get_errno())}")
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
