# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The files of a sandboxed stub (stub-sandbox=true, docs/hardening.md).

Before any model code runs, the stub gives up the server's controlling
terminal, then builds a root of its own (its own mount namespace, as
bubblewrap and nsjail do): a small read-only tmpfs that holds only bind
mounts of what it may read (the interpreter and its packages, the
system's libraries, a few files of /etc, the /proc of its pid namespace,
/sys, the directories the backend names: the model's own, its execution
environment, what the operator adds), read-only, without set-user-ID
files or devices; the operator's writable paths, writable; a /dev of
null, zero, full, random, urandom and tty alone; and private tmpfs of
``stub-sandbox-tmp-bytes`` each on /tmp and /dev/shm. Every path keeps
its host name; the host's root is detached. The rest of the host (its
unix sockets, terminals, other models, /home) is not there at all (the
detach on a thread of its own, which the stub waits for before it serves:
finish()).
Landlock then restricts it within that view: from then on it, and
everything it starts, may read only those paths and write only /tmp,
/dev/shm and what the operator adds. Landlock also keeps it from mounting
anything over that view, from abstract unix sockets made outside the
sandbox and from signalling processes outside it. Last, the stub drops
its capabilities but those to read files as its uid may. The backend
applies the namespaces and no_new_privs before the stub runs
(backend/src/process/child_steps.h).

A template's spare (tritonpy/stub/template.py) builds the part of the
root that every stub of its interpreter has before it is given its stub
(build_ahead); the stub then binds only its own paths into it.
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
import termios

from tritonpy.stub import _lifetime

# The private tmpfs of the stub, each of stub-sandbox-tmp-bytes.
SCRATCH = ("/tmp", "/dev/shm")
# Where the host's root is while the stub's own is built (then detached).
HOST = "/.tritonpy-host"
# The tmpfs of the new root and of its /dev: mount points and links only.
VIEW_BYTES = 1 << 20

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
# The devices a stub opens: the sink, the sources, and /dev/tty, which
# without a controlling terminal only says there is none (ENXIO). Others
# (GPUs) only as the operator adds them.
DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
)
# What /dev holds besides: links into the stub's own /proc.
DEVICE_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)


def interpreter(cwd: str | None = None) -> list[str]:
    """The interpreter's prefixes and every directory on its path but the
    server's working directory ``cwd`` (default: this process's), which
    ``python -m`` put first and the stub takes off (runtime.py)."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    paths.append(os.path.dirname(os.path.realpath(sys.executable)))
    if cwd is None:
        cwd = os.getcwd()
    for entry in sys.path:
        if os.path.isabs(entry) and entry != cwd:
            paths.append(entry)
            paths.extend(linked(entry))
    return paths


# The symbolic links found in each directory scanned, with its st_mtime_ns
# then: a sandboxed stubs' template scans its path once (prepare), and the
# stubs it forks list again only a directory changed since (a link made or
# removed in it changes its mtime).
_LINKS: dict[str, tuple[int, list[str]]] = {}


def linked(directory: str) -> list[str]:
    """Where the symbolic links of ``directory`` lead (a package linked
    into a path directory): Landlock judges a file where it is, not by
    the link that led there."""
    try:
        mtime = os.stat(directory).st_mtime_ns
        known = _LINKS.get(directory)
        if known is not None and known[0] == mtime:
            links = known[1]
        else:
            with os.scandir(directory) as entries:
                links = [e.path for e in entries if e.is_symlink()]
            _LINKS[directory] = (mtime, links)
    except OSError:
        return []
    return [os.path.realpath(p) for p in links]


def prepare() -> None:
    """In the template of sandboxed stubs: what each stub would find the
    same (the links of the interpreter's path) found once."""
    interpreter()


def rules(
    read: list[str], write: list[str], handled: int, python: list[str]
) -> list[tuple[str, int]]:
    """(path, rights) of the sandboxed stub, each within ``handled``;
    ``python``: interpreter()."""
    out = [(p, RUN) for p in (*SYSTEM, *python, *read)]
    out += [(p, READ) for p in (*ETC, *MACHINE)]
    # /dev listed, but of its devices only these opened: a disk's device
    # node would give a root server's stub every byte of the disk.
    out.append(("/dev", READ_DIR))
    out += [(p, READ_FILE | WRITE_FILE | IOCTL_DEV) for p in DEVICES]
    out += [(p, WRITE) for p in (*SCRATCH, *write)]
    return [(p, rights & handled) for p, rights in out]


def leave_terminal() -> None:
    """Gives up the server's controlling terminal, so that no TIOCSTI
    types into it: a session of its own, or, as the leader of its process
    group (which cannot start one), TIOCNOTTY."""
    try:
        os.setsid()
        return
    except OSError:
        pass
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:  # none to leave
        return
    try:
        fcntl.ioctl(tty, termios.TIOCNOTTY)
    finally:
        os.close(tty)


def null_stdin() -> None:
    """A stdin that is the null device (the backend opened it before the
    view was built) becomes the view's /dev/null: what the descriptor
    names then does not depend on when the kernel lets go of the host's
    detached mounts."""
    try:
        if os.fstat(0).st_rdev != os.stat("/dev/null").st_rdev:
            return
        null = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    os.dup2(null, 0)
    os.close(null)


def depth(path: str) -> int:
    return path.rstrip("/").count("/")


class View:
    """The stub's own root, built beneath ``/`` from the host's, which is
    at HOST meanwhile. Each path is bound at its host name; the symbolic
    links on the way are made again, and what they lead to bound."""

    def __init__(self) -> None:
        self.bound: list[tuple[str, bool]] = []  # (path, writable)
        # Directories made in a private tmpfs on the way to a bound path.
        self.ways: list[str] = []
        # The host's kind of each path asked so far ("link", "dir",
        # "file" or "" for none): paths share most of their ways, and a
        # stub starts faster for asking the host once per name.
        self.kinds: dict[str, str] = {}
        # Directories of the view known to be there.
        self.made: set[str] = set()

    def kind(self, here: str) -> str:
        known = self.kinds.get(here)
        if known is None:
            try:
                mode = os.lstat(HOST + here).st_mode
            except OSError:
                known = ""
            else:
                if stat.S_ISLNK(mode):
                    known = "link"
                elif stat.S_ISDIR(mode):
                    known = "dir"
                else:
                    known = "file"
            self.kinds[here] = known
        return known

    def covered(self, path: str, writable: bool) -> bool:
        return any(
            (path == b or path.startswith(b.rstrip("/") + "/")) and (w or not writable)
            for b, w in self.bound
        )

    def place(self, path: str, writable: bool, hops: int = 0) -> None:
        """Binds the host's ``path`` (nothing if it is not there or the
        stub cannot reach it)."""
        parts = [p for p in os.path.normpath(path).split("/") if p]
        if not parts or hops > 40:
            return
        here = ""
        kind = ""
        last = len(parts) - 1
        for i, part in enumerate(parts):
            here += "/" + part
            kind = self.kind(here)
            if kind == "link":
                target = os.readlink(HOST + here)
                if not os.path.lexists(here):
                    os.symlink(target, here)
                after = os.path.join(os.path.dirname(here), target, *parts[i + 1 :])
                self.place(os.path.normpath(after), writable, hops + 1)
                return
            if not kind or (i < last and kind != "dir"):
                return
            if i < last and here not in self.made:
                if not os.path.lexists(here):
                    os.mkdir(here)
                    if os.path.dirname(here) in SCRATCH:
                        self.ways.append(here)
                self.made.add(here)
        if self.covered(here, writable):
            return
        host = HOST + here
        if kind == "dir":
            os.makedirs(here, exist_ok=True)
        elif not os.path.lexists(here):
            os.close(os.open(here, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        if here == "/dev" or here.startswith("/dev/"):
            attributes = _lifetime.NO_SUID | _lifetime.NO_EXEC  # a device: opened as it is
        else:
            attributes = _lifetime.NO_SUID | _lifetime.NO_DEVICES
        if not writable:
            attributes |= _lifetime.READ_ONLY
        _lifetime.bind(host, here, attributes)
        self.bound.append((here, writable))


def _common_root(tmp_bytes: int, python: list[str]) -> View:
    """The part of the stub's root that every stub of an interpreter has:
    the new root pivoted into, its /tmp, /dev and /dev/shm, /proc, /sys,
    the system, ``python`` and /etc bound (see the module)."""
    # The new root on the host's /tmp, the host's root beneath it. Without
    # access times: a link followed for the first time would otherwise
    # write its atime, and a write under way makes the kernel refuse the
    # root's read-only flag (EBUSY) while finish_root_later sets it.
    _lifetime.mount_scratch("/tmp", VIEW_BYTES, noatime=True)
    os.mkdir("/tmp" + HOST)
    os.chdir("/tmp")
    _lifetime.pivot_here(HOST.lstrip("/"))
    os.chdir("/")
    view = View()
    os.mkdir("/tmp")
    _lifetime.mount_scratch("/tmp", tmp_bytes)
    os.mkdir("/dev")
    _lifetime.mount_scratch("/dev", VIEW_BYTES, noatime=True)
    for device in DEVICES:
        view.place(device, True)
    for name, target in DEVICE_LINKS:
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm")
    _lifetime.mount_scratch("/dev/shm", tmp_bytes)
    for system in ("/proc", "/sys"):
        if os.path.isdir(HOST + system):
            os.mkdir(system)
            _lifetime.bind(
                HOST + system,
                system,
                _lifetime.READ_ONLY | _lifetime.NO_SUID | _lifetime.NO_DEVICES | _lifetime.NO_EXEC,
            )
            view.bound.append((system, False))
    for path in sorted({*SYSTEM, *python, *ETC}, key=depth):
        view.place(path, False)
    for directory in ("/", "/dev"):
        os.chmod(directory, 0o755)
    return view


class Ahead:
    """The common part of a stub's root, built by a spare (the template's
    sandboxed child cloned ahead, template.py) before it is given its
    stub: what build_ahead made, or the error that stopped it (raised
    when the stub confines itself, as it would have been then)."""

    def __init__(self, tmp_bytes: int) -> None:
        self.tmp_bytes = tmp_bytes
        self.view: View | None = None
        self.error: OSError | None = None
        # The stub's working directory (the server's), entered once the
        # root holds what the stub reads.
        self.cwd = "/"
        # The Landlock ruleset with the rules of the common part in it
        # (-1: none), and those rules: the stub adds its own and applies it.
        self.ruleset = -1
        self.rules: set[tuple[str, int]] = set()


# Where a spare keeps its ruleset's descriptor: above those its stub's are
# placed at (child_steps.h), which the steps close.
RULESET_FD = 64


AHEAD: Ahead | None = None


def build_ahead(tmp_bytes: int) -> None:
    """In a spare, its ids mapped and its namespaces entered (child_steps.h):
    the common part of the root of the stub it will become (its scratch
    of ``tmp_bytes``, resized if that stub's differs)."""
    global AHEAD
    AHEAD = Ahead(tmp_bytes)
    try:
        python = interpreter()
        AHEAD.view = _common_root(tmp_bytes, python)
        handled, scoped = _landlock_rights()
        common = rules([], [], handled, python)
        AHEAD.ruleset = _lifetime.landlock_ruleset(handled, scoped, common, RULESET_FD)
        AHEAD.rules = set(common)
    except OSError as e:
        AHEAD.error = e


def reach(path: str) -> bool:
    """Whether the directory ``path`` is there; in a root built ahead, the
    host's is bound into it first, read-only, as on the interpreter's path
    (what the stub would have found before its root was built)."""
    if AHEAD is not None and AHEAD.view is not None and os.path.isdir(HOST + path):
        AHEAD.view.place(path, False)
    return os.path.isdir(path)


def own_root(
    read: list[str], write: list[str], tmp_bytes: int, python: list[str], cwd: str
) -> None:
    """Makes the view of the module the stub's root (see the module);
    ``python``: interpreter(); ``cwd``: the working directory to keep
    where the root has it."""
    if AHEAD is None:
        view = _common_root(tmp_bytes, python)
    else:
        if AHEAD.error is not None:
            raise AHEAD.error
        assert AHEAD.view is not None
        view = AHEAD.view
        if tmp_bytes != AHEAD.tmp_bytes:
            for scratch in SCRATCH:
                _lifetime.resize_scratch(scratch, tmp_bytes)
    # Those of the common part are covered, bound already.
    for path in sorted({*python, *read}, key=depth):
        view.place(path, False)
    for path in sorted(set(write), key=depth):
        view.place(path, True)
    # A directory of the host's on the way to what it reads (a repository
    # under /tmp) is not a place to write by that name either.
    for way in view.ways:
        _lifetime.bind(way, way, _lifetime.READ_ONLY, recursive=False)
    null_stdin()
    _lifetime.set_mount("/dev", _lifetime.READ_ONLY | _lifetime.NO_SUID | _lifetime.NO_EXEC)
    # The host's root detached, its mount point removed and the root made
    # read-only on a thread of their own (the detach waits for the
    # kernel), while the stub sets up the rest; finish() waits for them.
    _lifetime.finish_root_later(
        HOST, _lifetime.READ_ONLY | _lifetime.NO_SUID | _lifetime.NO_DEVICES
    )
    try:
        os.chdir(cwd)
    except OSError:
        pass  # not in the view: the root


def finish() -> None:
    """Waits until the host's root is gone from the stub's view (own_root
    started it): before the stub serves, so before any model code. OSError
    naming the step the kernel refused."""
    _lifetime.finish_root()


def _landlock_rights() -> tuple[int, int]:
    """The filesystem rights and scopes this kernel's Landlock handles.
    OSError where it has none."""
    abi = _lifetime.landlock_abi()
    handled = (1 << 13) - 1  # ABI 1
    if abi >= 2:
        handled |= REFER
    if abi >= 3:
        handled |= TRUNCATE
    if abi >= 5:
        handled |= IOCTL_DEV
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    return handled, scoped


def confine(read: list[str], write: list[str], tmp_bytes: int) -> None:
    """Mounts the scratch and restricts the stub (see the module). OSError
    naming the step the kernel refused."""
    handled, scoped = _landlock_rights()
    leave_terminal()
    cwd = os.getcwd() if AHEAD is None else AHEAD.cwd
    python = interpreter(cwd)
    own_root(read, write, tmp_bytes, python, cwd)
    os.environ["TMPDIR"] = "/tmp"
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        vars(tempfile)["tempdir"] = None  # chosen again, from TMPDIR
    own = rules(read, write, handled, python)
    if AHEAD is None:
        _lifetime.landlock(handled, scoped, own)
    else:
        _lifetime.landlock_finish(AHEAD.ruleset, [r for r in own if r not in AHEAD.rules])
    # Root of its user namespace no more: no mount_setattr to undo the
    # read-only view (Landlock stops the other mount calls), no raw
    # sockets, no ptrace. Reading stays as the stub's uid may.
    _lifetime.keep_capabilities(KEEP_CAPABILITIES)
