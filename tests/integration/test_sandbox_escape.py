# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A hostile model against the stub sandbox (stub-sandbox=true), as an
attacker would try it: one model (tests/integration/models/escape) whose
every request tries one way out, against a real server running as root
and one running as uid 65534. Every attempt must fail, each with the
failure that says the sandbox stopped it (an errno, or what it made not
being on the host afterwards), and the stub must serve on: the next
request is answered by the same stub (same host pid, same token).
Programs made to raise privileges (set-uid root, a file capability) that
a sandboxed model runs gain nothing, where a plain model's gain them.
(docs/hardening.md, "What the sandbox promises".)"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import socket
import stat
import struct
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from test_hostile_proc import stub_of
from test_sandbox_tightens import NOBODY, SANDBOX, SITE, as_nobody, python_for_nobody

import sysv
from checks import add_sub_works, load_models
from server import TritonServer, build_repository, children, explicit, free_ports, running

# add_sub_python keeps the backend named "python" (tritonpy's drop-in) loaded
# for the whole run, as an operator who serves unchanged models has it.
MODELS = ["escape", "add_sub", "add_sub_python"]
# The escape model under the drop-in name "python", which stub-sandbox (a
# setting of backend tritonpy) leaves unsandboxed: the controls.
PLAIN = "escape_plain"

# Landlock, a read-only mount, seccomp, or not there at all in its view
WRITE = frozenset({"EACCES", "EROFS", "EPERM", "ENOENT"})
READ = frozenset({"EACCES", "EPERM", "ENOENT"})  # or not there at all in the stub's view
CONNECT = frozenset({"ECONNREFUSED", "ENETUNREACH", "EACCES", "EPERM"})
OTHER_PROCESS = frozenset({"ESRCH", "EPERM", "ENOENT", "EACCES"})  # no such pid in its namespace
SYSCALL = frozenset({"EPERM", "ENOSYS", "EACCES"})  # no privilege, or filtered out
NAMESPACES = frozenset({"EPERM", "ENOSPC", "ENOSYS"})  # ENOSPC: user.max_*_namespaces is 0


@dataclass(frozen=True)
class Case:
    """The errno names that say an attempt was stopped. ``unseen``: a try
    may succeed where what it made is left for the test, which asserts the
    host does not see it. ``bound``: a listener of its own may be made,
    which the host must not reach. ``loaded``: a model it loads may load,
    if its code runs sandboxed (it then cannot leave its marker).
    ``controlled``: the same attempt by a plain model of the same server
    is the control: each try the sandbox refused gets through there, or
    fails with an errno that is not among ``refused``, so that the refusal
    is the sandbox's."""

    refused: frozenset[str]
    unseen: bool = False
    bound: bool = False
    loaded: bool = False
    controls: bool = False
    controlled: bool = False


CASES = {
    # The ten of the issue (and their kin).
    "pth_in_site_packages": Case(WRITE),
    "write_stdlib": Case(WRITE),
    "write_tritonpy_package": Case(WRITE),
    "write_other_model": Case(WRITE),
    "write_own_model": Case(WRITE),
    "write_etc": Case(WRITE),
    "write_root_home": Case(WRITE),
    "write_home": Case(WRITE),
    "read_etc_shadow": Case(READ),
    "read_other_model": Case(READ),
    "read_test_files": Case(READ),
    # The devices the test names are on the host and a plain model opens.
    "read_devices": Case(READ, controlled=True),
    "reopen_log_for_reading": Case(READ),
    "http_api": Case(CONNECT),
    "grpc_api": Case(CONNECT),
    "host_tcp_listener": Case(CONNECT),
    # Another host: the host's own non-loopback address, the internet.
    "other_hosts": Case(frozenset({"ENETUNREACH", "EHOSTUNREACH", "EACCES", "EPERM"})),
    "abstract_unix_connect": Case(frozenset({"ECONNREFUSED", "EPERM"})),
    "host_unix_socket": Case(frozenset({"EACCES", "EPERM", "ENOENT"})),
    "bind_abstract_taken": Case(frozenset({"EPERM", "EACCES"}), bound=True),
    "serve_abstract": Case(frozenset({"EPERM", "EACCES"}), bound=True),
    "serve_tcp": Case(frozenset({"EPERM", "EACCES"}), bound=True),
    "plant_and_preload": Case(WRITE),
    # Loading is allowed (stub-model-control): what it loads must be
    # sandboxed too, which the marker its code leaves (or not) tells.
    "load_other_backend": Case(frozenset(), loaded=True),
    # The model loading API is the server's: a sandboxed model must not
    # put its code under another model's name, nor take that model away.
    "replace_other_model": Case(frozenset(), controls=True),
    "unload_other_model": Case(frozenset(), controls=True),
    # Other processes.
    "ptrace_server": Case(OTHER_PROCESS),
    "ptrace_other_stub": Case(OTHER_PROCESS),
    "proc_mem_other_stub": Case(OTHER_PROCESS),
    "process_vm_readv_other_stub": Case(OTHER_PROCESS),
    "environ_of_others": Case(OTHER_PROCESS),
    # The server's host pid and another stub's are not in its pid namespace.
    "kill_server": Case(frozenset({"ESRCH"}), controlled=True),
    "pidfd_of_others": Case(OTHER_PROCESS | {"ENOSYS"}),
    # Files through the scratch directory.
    "symlink_through_scratch": Case(WRITE | {"ENOENT"}),
    # EXDEV: another filesystem (a private /tmp), or Landlock's refusal to
    # link a file where it would gain rights.
    "hardlink_through_scratch": Case(WRITE | {"EXDEV", "ENOENT"}),
    "proc_fd_reopen": Case(WRITE | {"ENOENT"}),
    "setuid_file_for_host": Case(WRITE, unseen=True),
    "dev_shm_seen_by_host": Case(WRITE, unseen=True),
    "tmp_seen_by_host": Case(WRITE, unseen=True),
    # EACCES: Landlock grants no right to make devices.
    "mknod_device": Case(frozenset({"EPERM", "EACCES"})),
    # Landlock grants no execution beneath /tmp and /dev/shm.
    "exec_from_tmp": Case(frozenset({"EACCES", "EPERM"})),
    # chown, utime, rename, link: refused as writing is (a read-only bind).
    "metadata_outside_scratch": Case(frozenset({"EROFS", "EACCES", "EPERM", "EXDEV"})),
    # Kernel interfaces a model has no use for.
    "io_uring_setup": Case(SYSCALL),
    "userfaultfd": Case(SYSCALL),
    "bpf": Case(SYSCALL),
    "perf_event_open": Case(SYSCALL),
    "keyctl": Case(SYSCALL),
    "raw_socket": Case(SYSCALL | {"EAFNOSUPPORT"}),
    "packet_socket": Case(SYSCALL | {"EAFNOSUPPORT"}),
    # Its capabilities are dropped: not even its own loopback's settings.
    "configure_network": Case(frozenset({"EPERM", "EACCES"})),
    "mount": Case(frozenset({"EPERM"})),
    "unshare": Case(NAMESPACES),
    "setns": Case(frozenset({"EPERM"})),
    "chroot": Case(frozenset({"EPERM"})),
    "pivot_root": Case(frozenset({"EPERM"})),
    "kernel_code": Case(frozenset({"EPERM", "ENOSYS"})),
    # EINVAL: in a pid namespace of its own, reboot reaches only that.
    "reboot": Case(frozenset({"EPERM", "EINVAL"})),
    "sysctl_write": Case(WRITE),
    "sysfs_write": Case(WRITE),
    "sysrq_and_cgroup": Case(WRITE | {"ENOENT"}),
    # No terminal of the server's to type into (ENXIO: it left the server's
    # session), and the filter's EPERM where the kernel answers ENOTTY or
    # EBADF; a plain model opens the server's terminal and types into it.
    "tiocsti": Case(frozenset({"ENXIO", "EPERM"}), controlled=True),
    "host_terminal": Case(READ),
    "open_by_handle_at": Case(frozenset({"EPERM"})),
    # System V IPC: an IPC namespace of its own has none of the host's
    # objects, and keeps what it makes from the host.
    "sysv_ipc_of_host": Case(frozenset({"ENOENT"}), controlled=True),
    "sysv_ipc_left_for_host": Case(frozenset(), unseen=True),
    # A pipe at 1 and 2, not the server's log.
    "log_descriptors": Case(frozenset({"ESPIPE"}), controlled=True),
}


@dataclass
class Escape:
    srv: TritonServer
    context: dict
    token: str  # the escape stub's, at the start
    stub: int  # its host pid
    work: Path


def digest(root: Path, victim: Path) -> dict[str, str]:
    files = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in [*files, victim]}


def attempt(srv: TritonServer, name: str, context: dict, model: str = "escape") -> dict:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        inputs = [
            httpclient.InferInput("ATTEMPT", [1], "BYTES"),
            httpclient.InferInput("CONTEXT", [1], "BYTES"),
        ]
        inputs[0].set_data_from_numpy(np.array([name.encode()], dtype=object))
        inputs[1].set_data_from_numpy(np.array([json.dumps(context).encode()], dtype=object))
        out = json.loads(c.infer(model, inputs).as_numpy("OUT")[0])
        assert isinstance(out, dict)
        return out
    finally:
        c.close()


# Runs the rest of its command line with a terminal of its own as the
# controlling terminal, as a tritonserver started from a shell has (the
# terminal's other end stays open in the server, unread).
WITH_TERMINAL = """
import fcntl, os, sys, termios
try:
    terminal, server_end = os.openpty()
    fcntl.ioctl(server_end, termios.TIOCSCTTY, 0)
    os.set_inheritable(terminal, True)
    os.close(server_end)
except OSError as e:  # no pseudo-terminals here: tiocsti then finds none
    print("no terminal for the server:", e, flush=True)
os.execvp(sys.argv[1], sys.argv[1:])
"""


def model_config(srv: TritonServer, name: str) -> dict:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        config = c.get_model_config(name)
        assert isinstance(config, dict)
        return config
    finally:
        c.close()


def server_for(uid: str, work: Path, repo: Path) -> TritonServer:
    args = [*explicit([*MODELS, PLAIN]), *SANDBOX]
    if uid == "root":
        return TritonServer(repo, work, args=args, prefix=[sys.executable, "-c", WITH_TERMINAL])
    python = python_for_nobody()
    if python is None:
        pytest.skip("no interpreter that uid 65534 can run with this installation")
    args += [
        f"--backend-config=tritonpy,python-executable={python}",
        f"--backend-config=python,python-executable={python}",
        f"--backend-config=tritonpy,env-cache-dir={work}/cache",
    ]
    prefix = [*as_nobody(), f"HOME={work}", f"PYTHONPATH={SITE}", python, "-c", WITH_TERMINAL]
    return TritonServer(repo, work, args=args, prefix=prefix)


@pytest.fixture(scope="module", params=["root", "nobody"])
def escape(request: pytest.FixtureRequest) -> Iterator[Escape]:
    """One server per uid for the whole module. Its work directory is open
    to all (mode 777), so that without the sandbox uid 65534 could write
    the repository, the victim and the marker directory: what stops the
    model there is the sandbox alone."""
    uid = request.param
    if os.geteuid() != 0:
        pytest.skip("the suite starts servers as root and as uid 65534")
    work = Path(tempfile.mkdtemp(prefix=f"tritonpy-escape-{uid}-"))
    listeners: list[socket.socket] = []
    # The host's System V objects, open to all (uid 65534's plain model
    # opens them too): the sandboxed model must not find them.
    shm_key, msg_key = secrets.randbits(30) + 1, secrets.randbits(30) + 1
    ipc: list[tuple[Callable[[int], None], int]] = []
    # A terminal of the host's, as an operator's shell has (no process
    # reads it: the model's read would find nothing, its open is what must
    # fail).
    try:
        terminals: tuple[int, ...] = os.openpty()
    except OSError:  # none on this machine: host_terminal is skipped
        terminals = ()
    try:
        ipc.append((sysv.remove_segment, sysv.make_segment(shm_key)))
        ipc.append((sysv.remove_queue, sysv.make_queue(msg_key)))
        token = secrets.token_hex(6)
        repo = build_repository(work / "repo", MODELS)
        plain_copy(repo, "escape", PLAIN)
        victim = work / "victim" / "target"
        victim.parent.mkdir()
        victim.write_text("untouched\n")
        (work / "marker").mkdir()
        for path in [work, *work.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o666)
        devices = host_devices(repo / "escape" / "devices")
        abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        abstract.bind(f"\0tritonpy-escape-host-{token}")
        abstract.listen(64)
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(64)
        host_ip = global_ipv4()
        outside = socket.socket()
        outside.bind((host_ip or "127.0.0.1", 0))
        outside.listen(64)
        (work / "sockets").mkdir()
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(str(work / "sockets" / "host.sock"))
        unix.listen(64)
        for path in (work / "sockets", work / "sockets" / "host.sock"):
            path.chmod(0o777)  # open to uid 65534 too, but for the sandbox
        listeners += [abstract, tcp, unix, outside]
        with running(server_for(uid, work, repo)) as srv:
            if uid == "nobody":
                assert os.stat(f"/proc/{srv.proc.pid}").st_uid == NOBODY
            # The pid the attempts aim at is the server's on the host: the
            # tritonserver whose children the stubs are.
            assert os.readlink(f"/proc/{srv.proc.pid}/exe").endswith("/tritonserver")
            assert stub_of(srv, "escape") in children(srv.proc.pid)
            context = {
                "token": token,
                "http": srv.http_port,
                "grpc": srv.grpc_port,
                "metrics": srv.metrics_port,
                "server_pid": srv.proc.pid,
                "other_stub": stub_of(srv, "add_sub"),
                "other_model": "add_sub",
                "other_config": model_config(srv, "add_sub"),
                "victim": str(victim),
                "marker_dir": str(work / "marker"),
                "abstract": f"tritonpy-escape-host-{token}",
                "host_tcp": tcp.getsockname()[1],
                "host_ip": host_ip,
                "host_ip_port": outside.getsockname()[1],
                "serve_abstract": f"tritonpy-escape-serve-{token}",
                "host_unix": str(work / "sockets" / "host.sock"),
                "host_terminal": os.ttyname(terminals[1]) if terminals else "",
                "sysv_shm": shm_key,
                "sysv_msg": msg_key,
            }
            context["devices"] = readable_outside(srv, context, devices)
            first = attempt(srv, "ping", context)
            yield Escape(
                srv,
                context,
                first["token"],
                stub_of(srv, "escape"),
                work,
            )
    finally:
        for remove, ident in ipc:
            remove(ident)
        for s in listeners:
            s.close()
        for fd in terminals:
            os.close(fd)
        shutil.rmtree(work, ignore_errors=True)


def host_devices(planted: Path) -> list[list[str]]:
    """[path, "read" or "open"] of the device nodes read_devices tries:
    the host's disks, its kernel log, memory and root's devices, those of
    them on the host, and, in ``planted`` (the escape model's directory,
    which its stub reads), a disk's node and the kernel log's, readable by
    all: a disk the server's user reads outside the sandbox, whoever it
    is. Opened for reading or only opened read-write (reading /dev/port
    touches the hardware)."""
    planted.mkdir()
    disks = sorted(os.listdir("/sys/block"), key=lambda d: d.startswith(("loop", "ram", "zram")))
    for disk in disks:  # a real disk first, one the host may open (device cgroup)
        major, minor = (int(n) for n in (Path("/sys/block") / disk / "dev").read_text().split(":"))
        os.mknod(planted / "disk", 0o444 | stat.S_IFBLK, os.makedev(major, minor))
        try:
            os.close(os.open(planted / "disk", os.O_RDONLY | os.O_NONBLOCK))
            break
        except OSError:
            os.unlink(planted / "disk")
    os.mknod(planted / "kmsg", 0o444 | stat.S_IFCHR, os.makedev(1, 11))
    found = [[str(planted / "disk"), "read"], [str(planted / "kmsg"), "read"]]
    for name in sorted(os.listdir("/dev")):
        if stat.S_ISBLK(os.stat(f"/dev/{name}").st_mode):
            found.append([f"/dev/{name}", "read"])
    for name in ("kmsg", "mem", "port", "kvm", "fuse", "console"):
        if os.path.exists(f"/dev/{name}"):
            found.append([f"/dev/{name}", "read" if name == "kmsg" else "open"])
    return found


def readable_outside(srv: TritonServer, context: dict, devices: list[list[str]]) -> list[list[str]]:
    """Those of ``devices`` a plain model of ``srv`` opens: their refusal
    in the sandbox is the sandbox's. The planted disk is among them."""
    out = attempt(srv, "read_devices", {**context, "devices": devices}, model=PLAIN)
    opened = {t["what"].split(" ")[1] for t in out["tries"] if t["errno"] == 0}
    assert devices[0][0] in opened, out
    return [d for d in devices if d[0] in opened]


def global_ipv4() -> str:
    """An IPv4 address of this machine's that is not loopback ("" if none):
    the source address of a route out (no packet is sent)."""
    for target in ("192.0.2.1", "10.255.255.255"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((target, 9))
            except OSError:
                continue
            address = str(s.getsockname()[0])
            if not address.startswith("127."):
                return address
    return ""


def name_of(code: int) -> str:
    return errno.errorcode.get(code, str(code)) if code > 0 else "succeeded"


def reachable_from_host(case: str, context: dict) -> str | None:
    """What the host reaches of a listener the model made (None: nothing)."""
    if case == "serve_tcp":
        address: object = ("127.0.0.1", context["serve_tcp"])
        family = socket.AF_INET
    elif case == "serve_abstract":
        address, family = "\0" + context["serve_abstract"], socket.AF_UNIX
    else:
        return None
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        try:
            s.connect(address)
        except ConnectionRefusedError:
            return None
        return f"the host connected to the model's listener {address!r}"


@pytest.mark.parametrize("case", list(CASES))
def test_escape_attempt(escape: Escape, case: str) -> None:
    expected = CASES[case]
    if case in ("host_terminal", "tiocsti") and not escape.context["host_terminal"]:
        pytest.skip("no pseudo-terminals on this machine")
    # A port free now: serve_tcp binds it (the one the fixture chose may be
    # taken since by another process of the machine).
    context = {
        **escape.context,
        "serve_tcp": free_ports(1)[0],
        "other_stub": stub_of(escape.srv, escape.context["other_model"]),
    }
    markers = set(os.listdir(escape.work / "marker"))
    files = digest(Path(escape.srv.repo), Path(escape.context["victim"]))
    out = attempt(escape.srv, case, context)
    assert out["tries"], out
    escapes = []
    for t in out["tries"]:
        left = t.get("left")
        if t["errno"] == 0 and expected.unseen and left:
            if os.path.lexists(left):
                escapes.append(f"{t['what']}: the host sees {left}")
                os.unlink(left)
        elif t["errno"] == 0 and expected.unseen and "left_segment" in t:
            if (segment := sysv.segment(t["left_segment"])) >= 0:
                escapes.append(f"{t['what']}: the host sees segment {segment}")
                sysv.remove_segment(segment)
        elif expected.controls:
            if not t["refused"]:
                escapes.append(f"{t['what']}: done")
        elif t["errno"] == 0 and (expected.bound or expected.loaded):
            pass  # asked from the host below: the listener, the marker
        elif t["errno"] == 0 and t.get("own_pipe"):
            pass  # its stdout reopened: the pipe of what it wrote itself
        elif name_of(t["errno"]) not in expected.refused:
            escapes.append(f"{t['what']}: {name_of(t['errno'])} {t['error']}".rstrip())
    if (reached := reachable_from_host(case, context)) is not None:
        escapes.append(reached)
    if case == "log_descriptors":
        for fd in (1, 2):
            line = f"escape: line {fd} of {context['token']}"
            if not escape.srv.wait_log(line, timeout=60):
                escapes.append(f"what the stub wrote to {fd} is not in the server's log")
    if case == "bind_abstract_taken":
        # The host's listener still takes connections, whoever bound.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect("\0" + escape.context["abstract"])
    # Refused naming stub_preload, or earlier, as every load of a sandboxed
    # model is by default (stub-sandbox-model-control=false).
    keys = ("stub_preload", "stub-sandbox-model-control=false")
    if case == "plant_and_preload" and not any(k in out["load_error"] for k in keys):
        escapes.append(f"a load with stub_preload was not refused naming it: {out['load_error']!r}")
    for path in out.get("planted", []):
        if os.path.lexists(path):
            escapes.append(f"the planted {path} is still there")
            os.unlink(path)
    uncontrolled = []
    if expected.controlled:
        # The control: the same attempt by a plain model of the same server.
        plain = {t["what"]: t for t in attempt(escape.srv, case, context, model=PLAIN)["tries"]}
        for t in out["tries"]:
            there = plain.get(t["what"], {"errno": -1, "error": "not tried"})
            if there["errno"] < 0 or name_of(there["errno"]) in expected.refused:
                uncontrolled.append(f"{t['what']}: a plain model: {there}")
        if case == "tiocsti":
            # Outside the sandbox the attempt types into the server's
            # terminal (EIO: a kernel with legacy TIOCSTI turned off).
            typed = plain.get("ioctl(/dev/tty, TIOCSTI)", {"errno": -1})
            if typed["errno"] not in (0, errno.EIO):
                uncontrolled.append(
                    f"a plain model typed nothing into the server's terminal: {typed}"
                )
    if expected.controls:
        # The other model answers its own sums, whatever was tried.
        try:
            add_sub_works(escape.srv)
        except Exception as e:
            escapes.append(f"{escape.context['other_model']} no longer answers as itself: {e}")
            load_models(escape.srv, escape.context["other_model"])  # from the repository
    for marker in sorted(set(os.listdir(escape.work / "marker")) - markers):
        status = (escape.work / "marker" / marker).read_text().splitlines()
        seen = [line for line in status if line.split(":")[0] in ("Uid", "NoNewPrivs", "NSpid")]
        escapes.append(f"the model's code ran outside the sandbox: {marker} {seen}")
    if (changed := digest(Path(escape.srv.repo), Path(escape.context["victim"]))) != files:
        escapes.append(f"changed: {sorted(k for k in files if files[k] != changed.get(k))}")
    # The same stub serves on (this also closes the listeners it made).
    again = attempt(escape.srv, "ping", escape.context)
    assert again["token"] == escape.token, "the stub was replaced"
    assert stub_of(escape.srv, "escape") == escape.stub
    assert escape.srv.proc.poll() is None
    tried = [f"{t['what']}: {name_of(t['errno'])}" for t in out["tries"]]
    assert escapes == [], "\n".join([*escapes, "(all tries:", *tried, ")"])
    assert uncontrolled == [], "\n".join(["refused outside the sandbox too:", *uncontrolled])


# The file capability CAP_DAC_READ_SEARCH (read any file), permitted and
# effective: struct vfs_cap_data, revision 2 (linux/capability.h).
CAP_DAC_READ_SEARCH = 2
READ_ANY_FILE = struct.pack("<IIIII", 0x02000000 | 1, 1 << CAP_DAC_READ_SEARCH, 0, 0, 0)


def privileged_programs(where: Path) -> dict[str, str]:
    """Copies of cat that read any file for whoever runs them: one set-uid
    root, one with a file capability. ``where`` is root's, open to group
    65534 alone (the non-root server's), so nobody else runs them."""
    cat = shutil.which("cat")
    assert cat is not None
    programs = {"setuid": where / "setuid_cat", "capability": where / "capability_cat"}
    for path in programs.values():
        shutil.copyfile(cat, path)
        os.chown(path, 0, NOBODY)
        path.chmod(0o750)
    programs["setuid"].chmod(0o4750)
    os.setxattr(programs["capability"], "security.capability", READ_ANY_FILE)
    os.chown(where, 0, NOBODY)
    where.chmod(0o750)
    return {name: str(path) for name, path in programs.items()}


def plain_copy(repo: Path, model: str, name: str) -> None:
    """``model`` as ``name`` under the drop-in name "python", which
    stub-sandbox (a setting of backend tritonpy) leaves unsandboxed: the
    same attempt's control."""
    shutil.copytree(repo / model, repo / name)
    config = (repo / name / "config.pbtxt").read_text().replace(f'"{model}"', f'"{name}"')
    config = config.replace('backend: "tritonpy"', 'backend: "python"')
    (repo / name / "config.pbtxt").write_text(config)


def sandboxed_copy(repo: Path, model: str, name: str) -> None:
    shutil.copytree(repo / model, repo / name)
    config = (repo / name / "config.pbtxt").read_text().replace(f'"{model}"', f'"{name}"')
    config += 'parameters { key: "stub_sandbox" value { string_value: "true" } }\n'
    (repo / name / "config.pbtxt").write_text(config)


@pytest.mark.parametrize("uid", ["root", "nobody"])
def test_a_program_that_would_raise_privileges_gains_nothing_in_the_sandbox(uid: str) -> None:
    """no_new_privs: a set-uid root program and one with a file capability,
    both made outside the sandbox and readable in it (an operator's read
    path, not under /tmp, where nothing is executed), run by a sandboxed
    model, have no_new_privs too, the stub's ids and no capability beyond
    the stub's bounding set; on a server that is not root they cannot read
    a file only root may. The same programs run by a plain model of the
    same server show that the probe works: their no_new_privs is 0, and
    on the server that is not root they gain root or the capability and
    read the file. (A root server's stub has effective uid root already:
    there, no_new_privs and the ids are what is asserted.)"""
    if os.geteuid() != 0:
        pytest.skip("the test makes set-uid root programs and starts a server as uid 65534")
    python = None
    if uid == "nobody":
        python = python_for_nobody()
        if python is None:
            pytest.skip("no interpreter that uid 65534 can run with this installation")
    work = Path(tempfile.mkdtemp(prefix=f"tritonpy-privileges-{uid}-"))
    # /var/tmp: Landlock lets a sandboxed stub execute nothing beneath /tmp.
    where = Path(tempfile.mkdtemp(prefix="tritonpy-privileged-", dir="/var/tmp"))
    try:
        assert not os.statvfs(where).f_flag & os.ST_NOSUID, "/var/tmp is mounted nosuid here"
        token = secrets.token_hex(8)
        secret = where / "secret"
        secret.write_text(token)
        secret.chmod(0o600)
        programs = privileged_programs(where)
        repo = build_repository(work / "repo", ["escape"])
        sandboxed_copy(repo, "escape", "escape_boxed")
        for path in [work, *work.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o666)
        args = [
            *explicit(["escape", "escape_boxed"]),
            f"--backend-config=tritonpy,stub-sandbox-read-paths={where}",
        ]
        prefix = None
        if python is not None:
            args += [
                f"--backend-config=tritonpy,python-executable={python}",
                f"--backend-config=tritonpy,env-cache-dir={work}/cache",
            ]
            prefix = [*as_nobody(), f"HOME={work}", f"PYTHONPATH={SITE}"]
        context = {"programs": programs, "secret": str(secret)}
        with running(TritonServer(repo, work, args=args, prefix=prefix)) as srv:
            assert os.stat(f"/proc/{srv.proc.pid}").st_uid == (NOBODY if python else 0)
            first = attempt(srv, "ping", {}, model="escape_boxed")
            plain = attempt(srv, "privileged_programs", context)
            boxed = attempt(srv, "privileged_programs", context, model="escape_boxed")
            # The control: outside the sandbox the probe sees the flag off,
            # and (not root) the programs gain what they are made to.
            for name, ran in plain["ran"].items():
                assert ran["status"]["NoNewPrivs"] == ["0"], (name, plain)
                if python is not None:
                    assert ran["read"] == token, (name, plain)
            if python is not None:
                assert plain["ran"]["setuid"]["status"]["Uid"][1] == "0", plain
                effective = int(plain["ran"]["capability"]["status"]["CapEff"][0], 16)
                assert effective & 1 << CAP_DAC_READ_SEARCH, plain
            own = boxed["own"]
            assert own["NoNewPrivs"] == ["1"], boxed
            bounding = int(own["CapBnd"][0], 16)
            for name, ran in boxed["ran"].items():
                status = ran["status"]
                assert status, (name, boxed)  # it ran, and read its own status
                assert status["NoNewPrivs"] == ["1"], (name, boxed)
                assert status["Uid"] == own["Uid"] and status["Gid"] == own["Gid"], (name, boxed)
                assert int(status["CapEff"][0], 16) & ~bounding == 0, (name, boxed)
                if python is not None:
                    assert ran["read"] == "" and "Permission denied" in ran["error"], (name, boxed)
            # The same stub serves on.
            assert attempt(srv, "ping", {}, model="escape_boxed")["token"] == first["token"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(where, ignore_errors=True)
