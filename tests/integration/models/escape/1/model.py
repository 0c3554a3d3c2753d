# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A hostile model: each request tries one way out of the stub sandbox and
says what happened. ATTEMPT names the attempt (a function of this file);
CONTEXT is JSON the test gives: the server's ports and pid, another stub's
host pid, a file of the test's to aim at (the victim), the name of an
abstract unix socket and a TCP port the test listens on, a port and a name
to serve the host on, a directory for the planted module's marker, and a
token that names everything this model creates.

Every answer is JSON: {"tries": [{"what", "errno", "error", "left"}],
...}. errno 0 means the try succeeded. A try that created a file leaves it
("left": its path) only where the test must check that the host does not
see it (scratch, /dev/shm); anywhere else what was written is removed at
once, so that a sandbox that fails leaves nothing behind (and what is
written is harmless: a comment, a path that does not exist). Attempts that
could hurt the machine if they succeeded are made so that they cannot: a
sysctl or sysfs value is written back as it was read, /proc/sysrq-trigger
and cgroup.procs are only opened, ptrace seizes from a child that exits,
signals are SIGCONT. Namespace, mount and root changes are tried in a
forked child whose exit status is the errno, so that the stub itself stays
as it was. Models it loads through pb_utils stay loaded (the server
unloads them as it stops). "ping" answers the token of this stub (made
at import) and closes what serving attempts left open."""

import ctypes
import fcntl
import json
import os
import platform
import secrets
import shutil
import socket
import stat
import struct
import sys
import tempfile
import termios

import numpy as np
import triton_python_backend_utils as pb_utils

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


# Writing files.


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


def write_into(t: Tries, directories, ctx: dict, suffix: str = "") -> None:
    name = f"tritonpy-escape-{ctx['token']}{suffix}"
    for d in directories:
        t.run(f"create {d}/{name}", create, os.path.join(d, name))


def site_packages() -> list[str]:
    import site

    found = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    return sorted(set(found + [p for p in site.getsitepackages() if os.path.isdir(p)]))


def pth_in_site_packages(t: Tries, ctx: dict, model) -> None:
    # A path line to nowhere: harmless should it ever be read.
    data = f"/nonexistent/tritonpy-escape-{ctx['token']}\n".encode()
    for d in site_packages():
        path = os.path.join(d, f"tritonpy-escape-{ctx['token']}.pth")
        t.run(f"create {path}", create, path, data)


def write_stdlib(t: Tries, ctx: dict, model) -> None:
    write_into(t, [os.path.dirname(os.__file__), os.path.dirname(json.__file__)], ctx, ".py")


def write_tritonpy_package(t: Tries, ctx: dict, model) -> None:
    import tritonpy

    package = os.path.dirname(tritonpy.__file__)
    write_into(t, [package, os.path.join(package, "stub")], ctx, ".py")


def write_other_model(t: Tries, ctx: dict, model) -> None:
    other = os.path.join(model.repository, "..", ctx["other_model"])
    write_into(t, [os.path.normpath(other), os.path.normpath(os.path.join(other, "1"))], ctx)


def write_own_model(t: Tries, ctx: dict, model) -> None:
    write_into(t, [model.repository, os.path.join(model.repository, "1")], ctx, ".py")
    path = os.path.join(model.repository, "config.pbtxt")
    t.run(f"append to {path}", append, path)


def append(path: str) -> dict:
    with open(path, "ab") as f:
        f.write(b"")
    return {"opened": path}


def write_etc(t: Tries, ctx: dict, model) -> None:
    write_into(t, ["/etc"], ctx)
    t.run("append to /etc/passwd", append, "/etc/passwd")


def write_root_home(t: Tries, ctx: dict, model) -> None:
    write_into(t, ["/root"], ctx)


def write_home(t: Tries, ctx: dict, model) -> None:
    homes = {os.path.expanduser("~")}
    if os.environ.get("HOME"):
        homes.add(os.environ["HOME"])
    write_into(t, sorted(homes), ctx)


def read_file(path: str) -> dict:
    with open(path, "rb") as f:
        return {"read": len(f.read())}


def read_etc_shadow(t: Tries, ctx: dict, model) -> None:
    t.run("read /etc/shadow", read_file, "/etc/shadow")


def read_other_model(t: Tries, ctx: dict, model) -> None:
    other = os.path.normpath(os.path.join(model.repository, "..", ctx["other_model"]))
    t.run(f"read {other}/1/model.py", read_file, os.path.join(other, "1", "model.py"))
    t.run(f"list {other}", lambda: {"listed": len(os.listdir(other))})


def read_test_files(t: Tries, ctx: dict, model) -> None:
    t.run(f"read {ctx['victim']}", read_file, ctx["victim"])


def read_head(path: str, flags: int = os.O_RDONLY) -> dict:
    fd = os.open(path, flags | os.O_NONBLOCK)
    try:
        return {"read": len(os.read(fd, 512))}
    except OSError as e:  # opened: the open is what the sandbox must refuse
        return {"read": 0, "then": str(e)}
    finally:
        os.close(fd)


def read_devices(t: Tries, ctx: dict, model) -> None:
    """The host's disks (every file on them, whatever Landlock says of
    their paths), the kernel log, memory, and device nodes of root only."""
    for name in sorted(os.listdir("/dev")):
        path = f"/dev/{name}"
        try:
            if stat.S_ISBLK(os.stat(path).st_mode):
                t.run(f"read {path}", read_head, path)
        except OSError:
            continue
    # Those the kernel has, whether the stub's /dev shows them or not.
    try:
        disks = sorted(os.listdir("/sys/block"))
    except OSError:
        disks = []
    for path in (*(f"/dev/{d}" for d in disks), "/dev/kmsg", "/dev/mem", "/dev/port"):
        t.run(f"read {path}", read_head, path)
    for path in ("/dev/kvm", "/dev/fuse", "/dev/console"):
        if os.path.exists(path):
            t.run(f"open {path} read-write", read_head, path, os.O_RDWR)


def reopen_log_for_reading(t: Tries, ctx: dict, model) -> None:
    """The stub's stdout is the server's log, open for writing only; a
    reopen for reading would show what every model logged."""
    for fd in (1, 2):
        t.run(f"read /proc/self/fd/{fd}", read_head, f"/proc/self/fd/{fd}")


# The network.


def connect_tcp(port: int) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /v2/health/ready HTTP/1.0\r\n\r\n")
        s.settimeout(10)
        try:
            head = s.recv(64).decode(errors="replace")
        except OSError:
            head = ""
        return {"connected": port, "answer": head}


def http_api(t: Tries, ctx: dict, model) -> None:
    t.run(f"HTTP 127.0.0.1:{ctx['http']}", connect_tcp, ctx["http"])
    t.run(f"metrics 127.0.0.1:{ctx['metrics']}", connect_tcp, ctx["metrics"])


def grpc_api(t: Tries, ctx: dict, model) -> None:
    t.run(f"gRPC 127.0.0.1:{ctx['grpc']}", connect_tcp, ctx["grpc"])


def host_tcp_listener(t: Tries, ctx: dict, model) -> None:
    t.run(f"TCP 127.0.0.1:{ctx['host_tcp']}", connect_tcp, ctx["host_tcp"])


def connect_abstract(name: str) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect("\0" + name)
        return {"connected": name}


def abstract_unix_connect(t: Tries, ctx: dict, model) -> None:
    t.run(f"connect @{ctx['abstract']}", connect_abstract, ctx["abstract"])


def keep_bound(family: int, address, listen: bool) -> dict:
    """A socket bound to ``address`` (listening if ``listen``), kept open
    until the next "ping"."""
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        if family == socket.AF_INET:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(address)
        if listen:
            s.listen(8)
    except OSError:
        s.close()
        raise
    KEPT.append(s)
    return {"bound": repr(address)}


def connect_unix(path: str) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        return {"connected": path}


def host_unix_socket(t: Tries, ctx: dict, model) -> None:
    """A unix socket of the host's bound to a path (what docker, containerd
    and the system bus listen on): a path, not a network's, so no network
    namespace keeps it out of reach."""
    t.run(f"connect {ctx['host_unix']}", connect_unix, ctx["host_unix"])


def bind_abstract_taken(t: Tries, ctx: dict, model) -> None:
    """Binding the name the host's listener holds: EADDRINUSE would show
    the host's abstract namespace; in a namespace of its own the bind is
    harmless and the test checks the host's listener is untouched."""
    name = ctx["abstract"]
    t.run(f"bind @{name}", keep_bound, socket.AF_UNIX, "\0" + name, False)


def serve_abstract(t: Tries, ctx: dict, model) -> None:
    name = ctx["serve_abstract"]
    t.run(f"listen on @{name}", keep_bound, socket.AF_UNIX, "\0" + name, True)


def serve_tcp(t: Tries, ctx: dict, model) -> None:
    port = ctx["serve_tcp"]
    t.run(f"listen on 0.0.0.0:{port}", keep_bound, socket.AF_INET, ("0.0.0.0", port), True)


def open_socket(family: int, kind: int, protocol: int) -> dict:
    socket.socket(family, kind, protocol).close()
    return {}


def raw_socket(t: Tries, ctx: dict, model) -> None:
    t.run(
        "socket(AF_INET, SOCK_RAW)",
        open_socket,
        socket.AF_INET,
        socket.SOCK_RAW,
        socket.IPPROTO_ICMP,
    )


def packet_socket(t: Tries, ctx: dict, model) -> None:
    eth_p_all = socket.htons(0x0003)
    t.run("socket(AF_PACKET, SOCK_RAW)", open_socket, socket.AF_PACKET, socket.SOCK_RAW, eth_p_all)


# Plant a module, have a template import it.

PLANTED = """import os
path = os.path.join({marker!r}, "imported-by-%d" % os.getpid())
with open(path, "w") as f:
    with open("/proc/self/status") as s:
        f.write(s.read())
"""

PRELOAD_MODEL = b"""import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = np.array([b"{}"], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]) for _ in requests]
"""


def plant_and_preload(t: Tries, ctx: dict, model) -> dict:
    """Writes a module into each directory of sys.path it can, then loads a
    model whose parameter stub_preload names it."""
    name = f"tritonpy_escape_plant_{ctx['token']}"
    source = PLANTED.format(marker=ctx["marker_dir"]).encode()
    planted = []
    directories = sorted(
        {os.path.abspath(p or os.getcwd()) for p in sys.path if os.path.isdir(p or ".")}
    )
    for d in directories:
        path = os.path.join(d, name + ".py")
        if t.run(f"create {path}", create, path, source, True) is not None:
            planted.append(path)
    # Beside the model too, which is on sys.path of the model's stub.
    config = {
        "backend": "tritonpy",
        "max_batch_size": 0,
        "input": [{"name": "ATTEMPT", "data_type": "TYPE_STRING", "dims": [1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]}],
        "parameters": {"stub_preload": {"string_value": name}},
    }
    loaded = f"preload_{ctx['token']}"  # not a prefix of this model's name
    error = ""
    try:
        # Left loaded (the server unloads it as it stops): unloaded at once,
        # such loads have crashed tritonserver (SIGSEGV).
        pb_utils.load_model(
            loaded, config=json.dumps(config), files={"file:1/model.py": PRELOAD_MODEL}
        )
    except Exception as e:
        error = str(e)
    for path in planted:
        try:
            os.unlink(path)
        except OSError:
            pass
    # What is left is for the test to see (and remove): nothing, once removed.
    for entry in t.tries:
        entry.pop("left", None)
    return {"load_error": error, "planted": planted}


LOADED_MODEL = """import os

# Runs as the loaded model's stub imports it: where the sandbox holds, it
# can write nothing outside its scratch, the marker directory included.
try:
    with open(os.path.join({marker!r}, "loaded-%d" % os.getpid()), "w") as f:
        with open("/proc/self/status") as s:
            f.write(s.read())
except OSError:
    pass


class TritonPythonModel:
    def execute(self, requests):
        return []
"""


def load_other_backend(t: Tries, ctx: dict, model) -> dict:
    """Loads a model of its own making under each backend name tritonpy
    may be installed as (its drop-in "python" is another backend to
    Triton, with backend settings of its own), and with its own config
    saying nothing of the sandbox; the model's code marks where it ran."""
    source = LOADED_MODEL.format(marker=ctx["marker_dir"]).encode()
    errors = {}
    for backend in ("python", "tritonpy"):
        config = {
            "backend": backend,
            "max_batch_size": 0,
            "input": [{"name": "ATTEMPT", "data_type": "TYPE_STRING", "dims": [1]}],
            "output": [{"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]}],
        }
        name = f"loaded_{backend}_{ctx['token']}"
        try:
            pb_utils.load_model(name, config=json.dumps(config), files={"file:1/model.py": source})
        except Exception as e:
            errors[backend] = str(e)
        else:
            errors[backend] = ""  # left loaded, as in plant_and_preload
    t.tries.append({"what": "load models of its own", "errno": 0, "error": ""})
    return {"load_errors": errors}


IMPOSTOR = b"""import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        zeros = np.zeros(4, np.float32)
        out = [pb_utils.Tensor("OUTPUT0", zeros), pb_utils.Tensor("OUTPUT1", zeros)]
        return [pb_utils.InferenceResponse(out) for _ in requests]
"""


def model_control(what: str, fn, *args) -> dict:
    """A model loading API call, its error as the answer ("" if done)."""
    try:
        fn(*args)
    except Exception as e:
        return {"what": what, "errno": 0, "error": str(e), "refused": True}
    return {"what": what, "errno": 0, "error": "", "refused": False}


def replace_other_model(t: Tries, ctx: dict, model) -> None:
    """Loads another model's name with code of its own (an impostor that
    answers zeros): the other model's clients would get its answers."""
    other = ctx["other_model"]
    config = json.dumps(ctx["other_config"])
    files = {"file:1/model.py": IMPOSTOR}
    t.tries.append(
        model_control(f"load_model({other}, files=...)", pb_utils.load_model, other, config, files)
    )


def unload_other_model(t: Tries, ctx: dict, model) -> None:
    other = ctx["other_model"]
    t.tries.append(model_control(f"unload_model({other})", pb_utils.unload_model, other))


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


# Through the scratch directory.


def scratch_directory() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="escape-", ignore_cleanup_errors=True)


def write_through(path: str) -> dict:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"escaped\n")
    finally:
        os.close(fd)
    return {"wrote through": path}


def symlink_through_scratch(t: Tries, ctx: dict, model) -> None:
    with scratch_directory() as scratch:
        link = os.path.join(scratch, "to-victim")
        os.symlink(ctx["victim"], link)
        t.run(f"write through {link} -> {ctx['victim']}", write_through, link)
        # A dangling link into a directory of the host: creating through it.
        dangling = os.path.join(scratch, "to-etc")
        target = f"/etc/tritonpy-escape-{ctx['token']}"
        os.symlink(target, dangling)
        t.run(f"create through {dangling} -> {target}", create_through, dangling, target)


def create_through(link: str, target: str) -> dict:
    """Opens ``link`` with O_CREAT (which follows a dangling link, where
    O_EXCL would not); what it created at ``target`` is removed."""
    os.close(os.open(link, os.O_WRONLY | os.O_CREAT, 0o644))
    os.unlink(target)
    return {"wrote": target}


def hardlink_through_scratch(t: Tries, ctx: dict, model) -> None:
    with scratch_directory() as scratch:
        link = os.path.join(scratch, "victim")
        t.run(f"link {ctx['victim']} -> {link}", os.link, ctx["victim"], link)
        if t.tries[-1]["errno"] == 0:
            t.run(f"write through {link}", write_through, link)


def proc_fd_reopen(t: Tries, ctx: dict, model) -> None:
    """Opens a file read-only, then again for writing through
    /proc/self/fd (a reopen the kernel checks like an open by path)."""
    for path in (os.path.join(model.repository, "1", "model.py"), ctx["victim"]):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            t.tries.append({"what": f"open {path} read-only", "errno": e.errno, "error": str(e)})
            continue
        try:
            t.run(
                f"reopen {path} for writing via /proc/self/fd/{fd}",
                write_through,
                f"/proc/self/fd/{fd}",
            )
        finally:
            os.close(fd)


def make_setuid(path: str) -> dict:
    shutil.copyfile("/usr/bin/id", path)
    os.chmod(path, 0o4755)
    return {"left": path, "mode": oct(os.stat(path).st_mode)}


def setuid_file_for_host(t: Tries, ctx: dict, model) -> None:
    for d in ("/tmp", "/dev/shm", "/var/tmp"):
        path = f"{d}/tritonpy-escape-suid-{ctx['token']}"
        t.run(f"setuid copy of /usr/bin/id at {path}", make_setuid, path)


def dev_shm_seen_by_host(t: Tries, ctx: dict, model) -> None:
    path = f"/dev/shm/tritonpy-escape-{ctx['token']}"
    t.run(f"create {path}", create, path, b"x", True)


def tmp_seen_by_host(t: Tries, ctx: dict, model) -> None:
    path = os.path.join(tempfile.gettempdir(), f"tritonpy-escape-{ctx['token']}-tmpdir")
    t.run(f"create {path}", create, path, b"x", True)
    path = f"/tmp/tritonpy-escape-{ctx['token']}-tmp"
    t.run(f"create {path}", create, path, b"x", True)


def mknod_device(t: Tries, ctx: dict, model) -> None:
    with scratch_directory() as scratch:
        for what, mode, dev in (
            ("block 8:0 (a disk)", stat.S_IFBLK, os.makedev(8, 0)),
            ("char 1:1 (/dev/mem)", stat.S_IFCHR, os.makedev(1, 1)),
        ):
            path = os.path.join(scratch, "dev")
            t.run(f"mknod {what}", os.mknod, path, mode | 0o600, dev)
            if os.path.lexists(path):
                os.unlink(path)


# Kernel interfaces.


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


def type_into(fd: int) -> dict:
    fcntl.ioctl(fd, termios.TIOCSTI, b"#")  # a comment, should it land in a shell
    return {"typed": fd}


def tiocsti(t: Tries, ctx: dict, model) -> None:
    """Types into the server's controlling terminal (what an operator's
    shell reads once the server exits), and into the descriptors the stub
    shares with the server."""
    try:
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError as e:
        t.tries.append({"what": "open /dev/tty", "errno": e.errno, "error": str(e)})
    else:
        try:
            t.run("ioctl(/dev/tty, TIOCSTI)", type_into, tty)
        finally:
            os.close(tty)
    for fd in (0, 1, 2):
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


ATTEMPTS = {
    f.__name__: f
    for f in (
        pth_in_site_packages,
        write_stdlib,
        write_tritonpy_package,
        write_other_model,
        write_own_model,
        write_etc,
        write_root_home,
        write_home,
        read_etc_shadow,
        read_other_model,
        read_test_files,
        read_devices,
        reopen_log_for_reading,
        http_api,
        grpc_api,
        host_tcp_listener,
        abstract_unix_connect,
        host_unix_socket,
        bind_abstract_taken,
        serve_abstract,
        serve_tcp,
        raw_socket,
        packet_socket,
        plant_and_preload,
        load_other_backend,
        replace_other_model,
        unload_other_model,
        ptrace_server,
        ptrace_other_stub,
        proc_mem_other_stub,
        process_vm_readv_other_stub,
        environ_of_others,
        kill_server,
        symlink_through_scratch,
        hardlink_through_scratch,
        proc_fd_reopen,
        setuid_file_for_host,
        dev_shm_seen_by_host,
        tmp_seen_by_host,
        mknod_device,
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
}


class TritonPythonModel:
    def initialize(self, args):
        self.repository = os.path.join(args["model_repository"])

    def execute(self, requests):
        responses = []
        for request in requests:
            name = pb_utils.get_input_tensor_by_name(request, "ATTEMPT").as_numpy()[0].decode()
            ctx = json.loads(pb_utils.get_input_tensor_by_name(request, "CONTEXT").as_numpy()[0])
            if name == "ping":
                while KEPT:
                    KEPT.pop().close()
                out = {"token": TOKEN}
            elif name in ATTEMPTS:
                t = Tries()
                extra = ATTEMPTS[name](t, ctx, self)
                out = {"tries": t.tries, **(extra or {})}
            else:
                raise pb_utils.TritonModelException(f"unknown ATTEMPT {name!r}")
            text = np.array([json.dumps(out).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", text)]))
        return responses
