# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What the attempts of the escape model share: raw syscalls (by number
where glibc has no wrapper), a record of tries and their errnos, files
made and read in one call, the stub's scratch."""

import ctypes
import os
import platform
import secrets
import socket
import tempfile

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long

# Syscalls glibc has no wrapper for (or one only in another library).
NUMBERS = {
    "x86_64": {
        "io_uring_setup": 425,
        "userfaultfd": 323,
        "bpf": 321,
        "perf_event_open": 298,
        "add_key": 248,
        "keyctl": 250,
        "kexec_load": 246,
        "init_module": 175,
        "pivot_root": 155,
    },
    "aarch64": {
        "io_uring_setup": 425,
        "userfaultfd": 282,
        "bpf": 280,
        "perf_event_open": 241,
        "add_key": 217,
        "keyctl": 219,
        "kexec_load": 104,
        "init_module": 105,
        "pivot_root": 41,
    },
}[platform.machine()]

TOKEN = secrets.token_hex(8)  # this stub's
KEPT: list[socket.socket] = []  # what serving attempts leave open until "ping"


def call(name, *args) -> int:
    """The raw syscall ``name``; raises OSError with its errno."""
    argv = [
        a
        if isinstance(a, ctypes._SimpleCData)
        else ctypes.c_char_p(a)
        if isinstance(a, bytes)
        else ctypes.c_void_p(a)
        for a in args
    ]
    r = LIBC.syscall(ctypes.c_long(NUMBERS[name]), *argv)
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def libc(name, *args) -> int:
    """The glibc wrapper ``name``; raises OSError with its errno."""
    fn = getattr(LIBC, name)
    r = fn(*args)
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


class Tries:
    def __init__(self) -> None:
        self.tries: list[dict] = []

    def run(self, what: str, fn, *args) -> object:
        """Runs fn(*args): its errno (0: it succeeded) is recorded."""
        try:
            result = fn(*args)
        except OSError as e:
            self.tries.append({"what": what, "errno": e.errno or 0, "error": str(e)})
            return None
        entry = {"what": what, "errno": 0, "error": ""}
        if isinstance(result, dict):
            entry.update(result)
        self.tries.append(entry)
        return result

    def in_child(self, what: str, fn) -> None:
        """fn() in a forked child, whose exit status is the errno of what it
        tried (0: done). The child touches nothing the stub shares but its
        namespaces, and leaves with os._exit."""
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                fn()
            except OSError as e:
                code = e.errno or 255
            except BaseException:
                code = 254
            os._exit(code)
        status = os.waitpid(pid, 0)[1]
        code = os.waitstatus_to_exitcode(status)
        if code == 0:
            self.tries.append({"what": what, "errno": 0, "error": ""})
        elif code > 0:
            self.tries.append({"what": what, "errno": code, "error": os.strerror(code)})
        else:
            self.tries.append({"what": what, "errno": -1, "error": f"child killed by {-code}"})


def create(path: str, data: bytes = b"# tritonpy escape test\n", keep: bool = False) -> dict:
    """Creates ``path`` (it must not exist) with ``data``; removed at once
    unless ``keep`` (then the answer says it is left)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    if not keep:
        os.unlink(path)
        return {"wrote": path}
    return {"left": path}


def read_head(path: str, flags: int = os.O_RDONLY) -> dict:
    fd = os.open(path, flags | os.O_NONBLOCK)
    try:
        return {"read": len(os.read(fd, 512))}
    except OSError as e:  # opened: the open is what the sandbox must refuse
        return {"read": 0, "then": str(e)}
    finally:
        os.close(fd)


def scratch_directory() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="escape-", ignore_cleanup_errors=True)


def read_file(path: str) -> dict:
    with open(path, "rb") as f:
        return {"read": len(f.read())}
