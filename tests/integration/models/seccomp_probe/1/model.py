# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Model code that asks the kernel for what a sandboxed stub's seccomp
filter refuses, and does what ordinary models do. MODE: "syscalls"
answers, per system call, the errno of the attempt (0: it succeeded);
"ordinary" runs threads, fork, a subprocess, a multiprocessing pool,
numpy and, if installed, torch, and answers what each
gave; "filters" answers the Seccomp lines of /proc/self/status; "load"
calls pb_utils.load_model with the JSON ARG {"name", "config", "files"}
and "unload" pb_utils.unload_model(ARG), answering the error ("" if
done). Answers are JSON."""

import ctypes
import json
import mmap
import multiprocessing
import os
import subprocess
import sys
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long

CLONE_NEWUSER = 0x10000000
CLONE_FS = 0x00000200
CLONE_PTRACE = 0x00002000
NO_SUCH_PID = 0x3FFFFFFF  # above pid_max's limit
SIGCHLD = 17
ADDR_NO_RANDOMIZE = 0x0040000

# x86_64 numbers, and the arguments of an attempt that would succeed if
# the kernel allowed the call, or fail with an errno of its own, not
# EPERM/ENOSYS, even for a process without capabilities; swapoff and acct
# check the capability before their arguments, so that only a plain
# model's answer (the test's control) tells the filter's EPERM apart.
CALLS = {
    "io_uring_setup": (425, 1, 0),
    "userfaultfd": (323, 1),  # UFFD_USER_MODE_ONLY, allowed to anyone
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "keyctl": (250, 0, -3, 0),  # KEYCTL_GET_KEYRING_ID of the session keyring
    "add_key": (248, 0, 0, 0, 0, 0),
    "bpf": (321, 0, 0, 0),
    "unshare_newuser": (272, CLONE_NEWUSER),
    "clone_newuser": (56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0),
    # Flags the kernel refuses with EINVAL before anything else.
    "unshare_newuser_einval": (272, CLONE_NEWUSER | CLONE_PTRACE),
    "clone_newuser_einval": (56, CLONE_NEWUSER | CLONE_FS | SIGCHLD, 0, 0, 0, 0),
    "clone3": (435, 0, 0),
    "personality_no_aslr": (135, ADDR_NO_RANDOMIZE),
    "ptrace": (101, 0x4206, NO_SUCH_PID, 0, 0),  # pid 1: EPERM unfiltered too
    "process_vm_readv": (310, 1, 0, 0, 0, 0, 0),
    "open_by_handle_at": (304, -100, 0, 0),
    "mount": (165, 0, 0, 0, 0, 0),
    "setns": (308, -1, 0),
    "kexec_file_load": (320, -1, -1, 0, 0, 0),
    "finit_module": (313, -1, 0, 0),
    "swapoff": (168, 1),  # a bad address: EFAULT with the capability
    "acct": (163, 1),
    "ioctl_tiocsti": (16, 0, 0x5412, 0),  # type into stdin's terminal, if it is one
    # Unfiltered, these fail with an errno of their own (a bad descriptor
    # or address) or succeed harmlessly: EPERM can only be the filter's.
    "io_uring_enter": (426, -1, 0, 0, 0, 0, 0),
    "io_uring_register": (427, -1, 0, 0, 0),
    "request_key": (249, 0, 0, 0, 0),
    "name_to_handle_at": (303, -1, 0, 0, 0, 0),
    "process_vm_writev": (311, 1, 0, 0, 0, 0, 0),
    "open_tree": (428, -1, 0, 0),
    "mount_setattr": (442, -1, 0, 0, 0, 0),
    "quotactl_fd": (443, -1, 0, 0, 0),
    "iopl_0": (172, 0),
    "ioperm_off": (173, 0, 0, 0),
    "personality_compat_layout": (135, 0x0200000),
    "personality_read_implies_exec": (135, 0x0400000),
    "personality_page_zero": (135, 0x0100000),
    "ioctl_tioclinux": (16, 0, 0x541C, 0),
    # An x32 call (getpid | __X32_SYSCALL_BIT).
    "x32_getpid": (39 | 0x40000000,),
}

# mov eax, 20 (the i386 getpid); int 0x80; ret
INT80_GETPID = bytes([0xB8, 0x14, 0x00, 0x00, 0x00, 0xCD, 0x80, 0xC3])


def int80() -> int:
    """The exit code of a child that makes a 32-bit call (int 0x80): a
    signal's negative number when it was killed."""
    pid = os.fork()
    if pid == 0:
        code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        code.write(INT80_GETPID)
        address = ctypes.addressof(ctypes.c_char.from_buffer(code))
        ctypes.CFUNCTYPE(ctypes.c_int)(address)()
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def attempt(nr: int, *args: int) -> int:
    """The errno of the raw call (0: it returned, and a child it made has
    exited at once)."""
    pid = os.fork()  # a call that would change the stub is made in a child
    if pid == 0:
        ctypes.set_errno(0)
        r = LIBC.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
        if r == 0 and nr == 56:
            os._exit(0)  # the clone's child, had there been one
        os._exit(ctypes.get_errno() if r < 0 else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def syscalls() -> dict:
    out = {name: attempt(*call) for name, call in CALLS.items()}
    # What stays allowed: the current persona, and a clone without a new
    # user namespace (fork).
    out["personality_query"] = attempt(135, 0xFFFFFFFF)
    out["clone_plain"] = attempt(56, SIGCHLD, 0, 0, 0, 0)
    out["int80_getpid"] = int80()
    return out


def square(x: int) -> int:
    return x * x


def ordinary() -> dict:
    out: dict = {}
    box: list[int] = []
    t = threading.Thread(target=lambda: box.append(os.getpid()))
    t.start()
    t.join()
    out["thread"] = box == [os.getpid()]
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    run = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
    out["subprocess"] = run.stdout.strip()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        out["pool"] = pool.map(square, [1, 2, 3])
    a = np.arange(16, dtype=np.float64).reshape(4, 4)
    out["numpy"] = float((a @ a).sum())
    try:
        import torch
    except ImportError:
        out["torch"] = None
    else:
        torch.set_num_threads(2)
        out["torch"] = float(torch.ones(64, 64).matmul(torch.ones(64, 64)).sum())
    return out


def filters() -> dict:
    with open("/proc/self/status") as f:
        return dict(
            line.strip().split(":\t") for line in f if line.startswith(("Seccomp", "NoNewPrivs"))
        )


def control(mode: str, arg: str) -> dict:
    try:
        if mode == "load":
            spec = json.loads(arg)
            files = {k: v.encode() for k, v in spec.get("files", {}).items()}
            pb_utils.load_model(spec["name"], config=spec.get("config", ""), files=files or None)
        else:
            pb_utils.unload_model(arg)
    except Exception as e:
        return {"error": str(e)}
    return {"error": ""}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            arg_tensor = pb_utils.get_input_tensor_by_name(request, "ARG")
            arg = arg_tensor.as_numpy()[0].decode() if arg_tensor is not None else ""
            if mode == "syscalls":
                out = syscalls()
            elif mode == "ordinary":
                out = ordinary()
            elif mode == "filters":
                out = filters()
            else:
                out = control(mode, arg)
            text = np.array([json.dumps(out).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", text)]))
        return responses
