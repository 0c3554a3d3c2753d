# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The files of a sandboxed stub (stub-sandbox=true, docs/hardening.md).

Before any model code runs, the stub makes its view of the filesystem
read-only (its own mount namespace: chmod, chown and links fail too,
which Landlock does not cover) but for the operator's writable paths,
mounts a private tmpfs of its own on /dev/shm (the host's /dev/shm is out
of sight), points TMPDIR at it, then restricts itself with Landlock: from then on it,
and everything it starts, may read the interpreter and its packages, the
system's libraries, a few files of /etc, /proc, parts of /sys, a few
devices and the directories the backend names (the model's own, its execution
environment, what the operator adds), and may write only its scratch,
a few devices and what the operator adds. Landlock also keeps it from
mounting anything over that view, from abstract unix sockets made outside
the sandbox and from signalling processes outside it. Last, the stub
drops its capabilities but those to read files as its uid may. The
backend applies
the namespaces and no_new_privs before the stub runs
(backend/src/child_steps.h).
"""

from __future__ import annotations

import os
import sys

from tritonpy.stub import _lifetime

SCRATCH = "/dev/shm"

# Landlock's filesystem rights (ABI 1 to 5) and scopes (ABI 6).
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

# The capabilities a sandboxed stub keeps: reading files as its uid may
# (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), within Landlock's rules.
KEEP_CAPABILITIES = (1 << 1) | (1 << 2)

READ = READ_FILE | READ_DIR
RUN = READ | EXECUTE
# Everything in a directory of its own but device nodes.
WRITE = (
    READ
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
)

# The system: programs and libraries.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs read of /etc (the loader, the C library's name services,
# time zone, TLS roots, locales); never shadow or gshadow.
ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.preload",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/lsb-release",
    "/etc/debian_version",
    "/etc/locale.alias",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/alternatives",
)
# What numpy, OpenBLAS, torch and the C library read of the machine: the
# stub's own /proc (its pid namespace's), the processors, memory nodes and
# cgroup limits.
MACHINE = (
    "/proc",
    "/sys/devices/system",
    "/sys/fs/cgroup",
    "/sys/kernel/mm",
    "/sys/bus",
    "/sys/class",
)
# The devices a stub opens: the sink, the sources, a terminal. Others
# (GPUs) only as the operator adds them.
DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/pts",
)


def interpreter() -> list[str]:
    """The interpreter's prefixes and every directory on its path but the
    server's working directory, which ``python -m`` put first and the stub
    takes off (runtime.py)."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    paths.append(os.path.dirname(os.path.realpath(sys.executable)))
    cwd = os.getcwd()
    for entry in sys.path:
        if os.path.isabs(entry) and entry != cwd:
            paths.append(entry)
            paths.extend(linked(entry))
    return paths


def linked(directory: str) -> list[str]:
    """Where the symbolic links of ``directory`` lead (a package linked
    into a path directory): Landlock judges a file where it is, not by
    the link that led there."""
    try:
        with os.scandir(directory) as entries:
            links = [e.path for e in entries if e.is_symlink()]
    except OSError:
        return []
    return [os.path.realpath(p) for p in links]


def rules(read: list[str], write: list[str], handled: int) -> list[tuple[str, int]]:
    """(path, rights) of the sandboxed stub, each within ``handled``."""
    out = [(p, RUN) for p in (*SYSTEM, *interpreter(), *read)]
    out += [(p, READ) for p in (*ETC, *MACHINE)]
    # /dev listed, but of its devices only these opened: a disk's device
    # node would give a root server's stub every byte of the disk.
    out.append(("/dev", READ_DIR))
    out += [(p, READ_FILE | WRITE_FILE | IOCTL_DEV) for p in DEVICES]
    out += [(p, WRITE) for p in (SCRATCH, *write)]
    return [(p, rights & handled) for p, rights in out]


def confine(read: list[str], write: list[str], tmp_bytes: int) -> None:
    """Mounts the scratch and restricts the stub (see the module). OSError
    naming the step the kernel refused."""
    abi = _lifetime.landlock_abi()
    handled = (1 << 13) - 1  # ABI 1
    if abi >= 2:
        handled |= REFER
    if abi >= 3:
        handled |= TRUNCATE
    if abi >= 5:
        handled |= IOCTL_DEV
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    _lifetime.read_only_view(write)
    _lifetime.mount_scratch(SCRATCH, tmp_bytes)
    os.environ["TMPDIR"] = SCRATCH
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        vars(tempfile)["tempdir"] = None  # chosen again, from TMPDIR
    _lifetime.landlock(handled, scoped, rules(read, write, handled))
    # Root of its user namespace no more: no mount_setattr to undo the
    # read-only view (Landlock stops the other mount calls), no raw
    # sockets, no ptrace. Reading stays as the stub's uid may.
    _lifetime.keep_capabilities(KEEP_CAPABILITIES)
