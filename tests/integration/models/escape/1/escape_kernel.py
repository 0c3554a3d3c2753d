# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Attempts on other processes and on the kernel: ptrace, their memory
and environment, signals, and interfaces a model has no use for (see
model.py)."""

import ctypes
import fcntl
import os
import secrets
import socket
import struct
import termios

from escape_tries import LIBC, Tries, call, libc, read_file, read_head, scratch_directory

# Other processes.

PTRACE_SEIZE = 0x4206


def ptrace_seize(pid: int) -> None:
    LIBC.ptrace.restype = ctypes.c_long
    libc("ptrace", ctypes.c_long(PTRACE_SEIZE), ctypes.c_long(pid), None, None)


def ptrace_server(t: Tries, ctx: dict, model) -> None:
    t.in_child(
        f"ptrace(PTRACE_SEIZE, server {ctx['server_pid']})", lambda: ptrace_seize(ctx["server_pid"])
    )


def ptrace_other_stub(t: Tries, ctx: dict, model) -> None:
    pid = ctx["other_stub"]
    t.in_child(f"ptrace(PTRACE_SEIZE, stub {pid})", lambda: ptrace_seize(pid))


def proc_mem_other_stub(t: Tries, ctx: dict, model) -> None:
    pid = ctx["other_stub"]
    t.run(
        f"open /proc/{pid}/mem", lambda: {"fd": os.close(os.open(f"/proc/{pid}/mem", os.O_RDONLY))}
    )
    t.run(
        f"open /proc/{ctx['server_pid']}/mem",
        lambda: {"fd": os.close(os.open(f"/proc/{ctx['server_pid']}/mem", os.O_RDONLY))},
    )


class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def process_vm_readv(pid: int) -> dict:
    buf = ctypes.create_string_buffer(8)
    local = IOVec(ctypes.cast(buf, ctypes.c_void_p), 8)
    # The first page of a non-PIE x86-64 executable; any address would do
    # to see whether the kernel lets the read be tried at all.
    remote = IOVec(ctypes.c_void_p(0x400000), 8)
    LIBC.process_vm_readv.restype = ctypes.c_ssize_t
    libc(
        "process_vm_readv",
        ctypes.c_int(pid),
        ctypes.byref(local),
        ctypes.c_ulong(1),
        ctypes.byref(remote),
        ctypes.c_ulong(1),
        ctypes.c_ulong(0),
    )
    return {"read": buf.raw.hex()}


def process_vm_readv_other_stub(t: Tries, ctx: dict, model) -> None:
    for what, pid in (("stub", ctx["other_stub"]), ("server", ctx["server_pid"])):
        t.run(f"process_vm_readv({what} {pid})", process_vm_readv, pid)


def environ_of_others(t: Tries, ctx: dict, model) -> None:
    for pid in (ctx["other_stub"], ctx["server_pid"]):
        for what in ("environ", "cmdline"):
            t.run(f"read /proc/{pid}/{what}", read_file, f"/proc/{pid}/{what}")


def kill_server(t: Tries, ctx: dict, model) -> None:
    import signal

    for what, pid in (("server", ctx["server_pid"]), ("stub", ctx["other_stub"])):
        t.run(f"kill({what} {pid}, SIGCONT)", os.kill, pid, signal.SIGCONT)


def pidfd_of_others(t: Tries, ctx: dict, model) -> None:
    for what, pid in (("server", ctx["server_pid"]), ("stub", ctx["other_stub"])):
        t.run(f"pidfd_open({what} {pid})", pidfd_open, pid)


def pidfd_open(pid: int) -> dict:
    os.close(os.pidfd_open(pid))
    return {"pidfd": pid}


# Kernel interfaces.


SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914


def set_loopback_flags() -> dict:
    """Sets the loopback's flags to what they are (a change of nothing,
    which still needs CAP_NET_ADMIN)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags))
        return {"flags": flags}


def configure_network(t: Tries, ctx: dict, model) -> None:
    t.run("ioctl(SIOCSIFFLAGS, lo)", set_loopback_flags)


def io_uring_setup(t: Tries, ctx: dict, model) -> None:
    params = ctypes.create_string_buffer(120)
    t.run(
        "io_uring_setup(1)",
        lambda: {
            "fd": os.close(call("io_uring_setup", ctypes.c_long(1), ctypes.addressof(params)))
        },
    )


def userfaultfd(t: Tries, ctx: dict, model) -> None:
    user_mode_only = 1
    for what, flags in (
        ("UFFD_USER_MODE_ONLY", os.O_CLOEXEC | user_mode_only),
        ("kernel faults too", os.O_CLOEXEC),
    ):
        t.run(
            f"userfaultfd({what})",
            lambda f=flags: {"fd": os.close(call("userfaultfd", ctypes.c_long(f)))},
        )


def bpf(t: Tries, ctx: dict, model) -> None:
    # BPF_MAP_CREATE of an array map: map_type 2, key 4, value 4, 1 entry.
    attr = ctypes.create_string_buffer(struct.pack("IIII", 2, 4, 4, 1) + bytes(112))
    t.run(
        "bpf(BPF_MAP_CREATE)",
        lambda: {
            "fd": os.close(
                call("bpf", ctypes.c_long(0), ctypes.addressof(attr), ctypes.c_long(128))
            )
        },
    )


def perf_event_open(t: Tries, ctx: dict, model) -> None:
    # PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, size 136 (VER8),
    # disabled | exclude_kernel | exclude_hv: what the most lenient
    # perf_event_paranoid allows anyone, for themselves.
    attr = ctypes.create_string_buffer(
        struct.pack("IIQQQQQ", 1, 136, 1, 0, 0, 0, 0b1100001) + bytes(88)
    )
    for what, pid, cpu in (("itself", 0, -1), ("the whole CPU 0", -1, 0)):
        t.run(
            f"perf_event_open({what})",
            lambda p=pid, c=cpu: {
                "fd": os.close(
                    call(
                        "perf_event_open",
                        ctypes.addressof(attr),
                        ctypes.c_long(p),
                        ctypes.c_long(c),
                        ctypes.c_long(-1),
                        ctypes.c_long(0),
                    )
                )
            },
        )


def keyctl(t: Tries, ctx: dict, model) -> None:
    session = -3  # KEY_SPEC_SESSION_KEYRING, inherited from the server
    unlink = 9  # KEYCTL_UNLINK

    def add() -> dict:
        key = call(
            "add_key",
            b"user",
            f"tritonpy-escape-{ctx['token']}".encode(),
            b"x",
            ctypes.c_long(1),
            ctypes.c_long(session),
        )
        call("keyctl", ctypes.c_long(unlink), ctypes.c_long(key), ctypes.c_long(session))
        return {"key": key}

    t.run("add_key(user, session keyring)", add)
    # KEYCTL_GET_KEYRING_ID of the session keyring: any handle at all.
    t.run(
        "keyctl(KEYCTL_GET_KEYRING_ID)",
        lambda: {"id": call("keyctl", ctypes.c_long(0), ctypes.c_long(session), ctypes.c_long(0))},
    )


def mount(t: Tries, ctx: dict, model) -> None:
    with scratch_directory() as scratch:

        def mount_tmpfs() -> None:
            libc("mount", b"none", scratch.encode(), b"tmpfs", ctypes.c_ulong(0), None)
            libc("umount2", scratch.encode(), ctypes.c_int(2))  # MNT_DETACH

        def remount_root() -> None:
            # MS_REMOUNT | MS_BIND of / writable: a read-only view undone.
            libc("mount", None, b"/", None, ctypes.c_ulong(32 | 4096), None)

        t.in_child("mount tmpfs", mount_tmpfs)
        t.in_child("mount -o remount,bind /", remount_root)


CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def unshare(t: Tries, ctx: dict, model) -> None:
    for what, flags in (
        ("CLONE_NEWUSER", CLONE_NEWUSER),
        ("CLONE_NEWNS", CLONE_NEWNS),
        ("CLONE_NEWNET", CLONE_NEWNET),
    ):
        t.in_child(f"unshare({what})", lambda f=flags: libc("unshare", ctypes.c_int(f)))


def setns(t: Tries, ctx: dict, model) -> None:
    """Joins its own mount and network namespaces again (a descriptor of a
    namespace is what setns takes, and its own are the ones it can open):
    the kernel asks for CAP_SYS_ADMIN over them, which a stub keeps none
    of."""
    for kind, flag in (("mnt", CLONE_NEWNS), ("net", CLONE_NEWNET)):

        def join(k=kind, f=flag) -> None:
            fd = os.open(f"/proc/self/ns/{k}", os.O_RDONLY)
            libc("setns", ctypes.c_int(fd), ctypes.c_int(f))

        t.in_child(f"setns(/proc/self/ns/{kind})", join)


def chroot(t: Tries, ctx: dict, model) -> None:
    with scratch_directory() as scratch:
        t.in_child(f"chroot({scratch})", lambda: libc("chroot", scratch.encode()))


def pivot_root(t: Tries, ctx: dict, model) -> None:
    t.in_child("pivot_root(/, /)", lambda: call("pivot_root", b"/", b"/"))


def kernel_code(t: Tries, ctx: dict, model) -> None:
    t.run(
        "kexec_load",
        lambda: {
            "done": call("kexec_load", ctypes.c_long(0), ctypes.c_long(0), None, ctypes.c_long(0))
        },
    )
    t.run("init_module", lambda: {"done": call("init_module", None, ctypes.c_long(0), b"")})


def reboot(t: Tries, ctx: dict, model) -> None:
    # LINUX_REBOOT_CMD_CAD_OFF: harmless should it pass; in a pid namespace
    # of its own the kernel answers EINVAL.
    LIBC.reboot.restype = ctypes.c_int
    t.run("reboot(CAD_OFF)", lambda: {"done": libc("reboot", ctypes.c_int(0))})


def rewrite_same(path: str, value: bytes) -> dict:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value)
    finally:
        os.close(fd)
    return {"rewrote": path}


def sysctl_write(t: Tries, ctx: dict, model) -> None:
    path = "/proc/sys/kernel/core_pattern"
    with open(path, "rb") as f:
        value = f.read()
    t.run(f"write {path} (its own value)", rewrite_same, path, value)


def sysfs_write(t: Tries, ctx: dict, model) -> None:
    path = "/sys/kernel/mm/transparent_hugepage/enabled"
    with open(path, "rb") as f:
        value = f.read().split(b"[")[1].split(b"]")[0]
    t.run(f"write {path} (its own value)", rewrite_same, path, value)


def open_for_writing(path: str) -> dict:
    os.close(os.open(path, os.O_WRONLY))
    return {"opened": path}


def sysrq_and_cgroup(t: Tries, ctx: dict, model) -> None:
    for path in ("/proc/sysrq-trigger", "/sys/fs/cgroup/cgroup.procs"):
        t.run(f"open {path} for writing", open_for_writing, path)


NEVER_OPENED = 1000  # a descriptor number the stub never uses


def type_into(fd: int) -> dict:
    fcntl.ioctl(fd, termios.TIOCSTI, b"#")  # a comment, should it land in a shell
    return {"typed": fd}


def open_tty() -> dict:
    return {"fd": os.open("/dev/tty", os.O_RDWR)}


def tiocsti(t: Tries, ctx: dict, model) -> None:
    """Types into the server's controlling terminal (what an operator's
    shell reads once the server exits), into the descriptors the stub
    shares with the server, and into one it never opened: unfiltered, the
    kernel answers the last ENOTTY or EBADF, where the filter's answer is
    EPERM."""
    tty = t.run("open /dev/tty", open_tty)
    if isinstance(tty, dict):
        try:
            t.run("ioctl(/dev/tty, TIOCSTI)", type_into, tty["fd"])
        finally:
            os.close(tty["fd"])
    for fd in (0, 1, 2, NEVER_OPENED):
        t.run(f"ioctl({fd}, TIOCSTI)", type_into, fd)


def host_terminal(t: Tries, ctx: dict, model) -> None:
    """Opens a terminal of the host's that is not the server's (an
    operator's shell would read from it): reading it takes their keys."""
    path = ctx["host_terminal"]
    t.run(f"open {path} read-write", read_head, path, os.O_RDWR | os.O_NOCTTY)


def open_by_handle_at(t: Tries, ctx: dict, model) -> None:
    # A file handle of the root directory's inode 2 (ext4's root), as the
    # "shocker" exploit forged one: opening it needs no path at all.
    handle = ctypes.create_string_buffer(struct.pack("IiQ", 8, 1, 2))
    # Any readable directory of the filesystem (not O_PATH, which the call
    # refuses with EBADF).
    mount_fd = os.open(os.path.dirname(os.__file__), os.O_RDONLY)
    try:
        LIBC.open_by_handle_at.restype = ctypes.c_int
        t.run(
            "open_by_handle_at(forged handle)",
            lambda: {
                "fd": os.close(
                    libc(
                        "open_by_handle_at",
                        ctypes.c_int(mount_fd),
                        handle,
                        ctypes.c_int(os.O_RDONLY),
                    )
                )
            },
        )
    finally:
        os.close(mount_fd)


# System V IPC (sys/ipc.h): objects of the IPC namespace, not of a file.
IPC_CREAT = 0o1000
IPC_EXCL = 0o2000


def sysv_get(kind: str, key: int, *size: int) -> dict:
    args = [ctypes.c_int(key), *(ctypes.c_size_t(n) for n in size), ctypes.c_int(0)]
    return {"id": libc(kind, *args)}


def sysv_ipc_of_host(t: Tries, ctx: dict, model) -> None:
    """Opens the host's shared memory segment and message queue by their
    keys: with them a model reads, overwrites or removes what other
    processes of the machine keep there."""
    t.run(f"shmget(host key {ctx['sysv_shm']:#x})", sysv_get, "shmget", ctx["sysv_shm"], 0)
    t.run(f"msgget(host key {ctx['sysv_msg']:#x})", sysv_get, "msgget", ctx["sysv_msg"])


def make_segment(key: int) -> dict:
    flags = ctypes.c_int(IPC_CREAT | IPC_EXCL | 0o600)
    libc("shmget", ctypes.c_int(key), ctypes.c_size_t(1 << 20), flags)
    return {"left_segment": key}


def sysv_ipc_left_for_host(t: Tries, ctx: dict, model) -> None:
    """Makes a segment and keeps it: in the host's namespace it would
    outlive the stub and the server, outside every limit of theirs."""
    key = secrets.randbits(30) + 1
    t.run(f"shmget(key {key:#x}, IPC_CREAT) kept", make_segment, key)


def log_descriptors(t: Tries, ctx: dict, model) -> None:
    """What the stub holds at descriptors 1 and 2: where the server logs to
    a file, the file itself would let it truncate, overwrite or fallocate
    the log. Each try changes nothing of a file (no bytes, an offset read,
    blocks it has; not a truncate, which would race the server's writes in
    the control): refused, it says a pipe is there instead. What the stub
    writes still reaches the log."""
    for fd in (1, 2):
        os.write(fd, f"escape: line {fd} of {ctx['token']}\n".encode())
        t.run(f"lseek({fd}, 0, SEEK_CUR)", lambda f=fd: {"at": os.lseek(f, 0, os.SEEK_CUR)})
        t.run(f"pwrite({fd}) of no bytes at 0", lambda f=fd: {"wrote": os.pwrite(f, b"", 0)})
        t.run(f"posix_fallocate({fd}, 0, 1)", lambda f=fd: os.posix_fallocate(f, 0, 1))


ATTEMPTS = (
    log_descriptors,
    sysv_ipc_of_host,
    sysv_ipc_left_for_host,
    configure_network,
    ptrace_server,
    ptrace_other_stub,
    pidfd_of_others,
    proc_mem_other_stub,
    process_vm_readv_other_stub,
    environ_of_others,
    kill_server,
    io_uring_setup,
    userfaultfd,
    bpf,
    perf_event_open,
    keyctl,
    mount,
    unshare,
    setns,
    chroot,
    pivot_root,
    kernel_code,
    reboot,
    sysctl_write,
    sysfs_write,
    sysrq_and_cgroup,
    tiocsti,
    host_terminal,
    open_by_handle_at,
)
