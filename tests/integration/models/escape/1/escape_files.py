# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Attempts on files: writing where only the scratch may be written,
reading what is not the stub's, links, reopens and set-uid files
through the scratch, and programs that would raise privileges (see
model.py)."""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

from escape_tries import Tries, create, read_file, read_head, scratch_directory

# Writing files.


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


def read_etc_shadow(t: Tries, ctx: dict, model) -> None:
    t.run("read /etc/shadow", read_file, "/etc/shadow")


def read_other_model(t: Tries, ctx: dict, model) -> None:
    other = os.path.normpath(os.path.join(model.repository, "..", ctx["other_model"]))
    t.run(f"read {other}/1/model.py", read_file, os.path.join(other, "1", "model.py"))
    t.run(f"list {other}", lambda: {"listed": len(os.listdir(other))})


def read_test_files(t: Tries, ctx: dict, model) -> None:
    t.run(f"read {ctx['victim']}", read_file, ctx["victim"])


def open_device(path: str) -> dict:
    """Opens a device read-write and closes it, reading nothing (a read of
    some, such as /dev/port, touches the hardware)."""
    os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOCTTY))
    return {"opened": path}


def read_devices(t: Tries, ctx: dict, model) -> None:
    """The host's disks (every file on them, whatever Landlock says of
    their paths), the kernel log, memory, and device nodes of root only:
    those the test names (on the host, and opened by a plain model of the
    same server), and the disks its own view shows."""
    tried = set()
    for path, how in ctx["devices"]:
        tried.add(path)
        if how == "read":
            t.run(f"read {path}", read_head, path)
        else:
            t.run(f"open {path} read-write", open_device, path)
    # Those the kernel has, whether its /dev shows them or not.
    try:
        disks = [f"/dev/{d}" for d in sorted(os.listdir("/sys/block"))]
    except OSError:
        disks = []
    for path in [*(f"/dev/{name}" for name in sorted(os.listdir("/dev"))), *disks]:
        try:
            if path not in tried and stat.S_ISBLK(os.stat(path).st_mode):
                t.run(f"read {path}", read_head, path)
        except OSError:
            continue


def read_unless_own_pipe(path: str) -> dict:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            return {"own_pipe": True}  # what the stub itself wrote, nothing else
    finally:
        os.close(fd)
    return read_head(path)


def reopen_log_for_reading(t: Tries, ctx: dict, model) -> None:
    """Were the stub's stdout the server's log (open for writing only), a
    reopen for reading would show what every model logged. A sandboxed
    stub's is a pipe of its own to the backend's relay: reopened, it gives
    back only what the stub wrote."""
    for fd in (1, 2):
        t.run(f"read /proc/self/fd/{fd}", read_unless_own_pipe, f"/proc/self/fd/{fd}")


# Through the scratch directory.


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


def exec_from_tmp(t: Tries, ctx: dict, model) -> None:
    """A program the model writes where it may write, then runs: refused
    (what it runs must come from what it may only read)."""
    for d in ("/tmp", "/dev/shm"):
        path = f"{d}/tritonpy-escape-exec-{ctx['token']}"
        try:
            shutil.copyfile("/bin/true", path)
            os.chmod(path, 0o755)
        except OSError as e:
            t.tries.append({"what": f"copy /bin/true to {path}", "errno": e.errno, "error": str(e)})
            continue
        try:
            t.in_child(f"execute {path}", lambda path=path: os.execv(path, [path]))
        finally:
            os.unlink(path)


def status_fields(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "CapEff", "CapBnd", "NoNewPrivs"):
            out[key] = value.split()
    return out


def run_program(argv: list) -> dict:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60)
    except OSError as e:
        return {"out": "", "error": f"[Errno {e.errno}] {e.strerror}"}
    return {"out": done.stdout.decode(errors="replace"), "error": done.stderr.decode().strip()}


def privileged_programs(t: Tries, ctx: dict, model) -> dict:
    """Runs each program of CONTEXT's "programs" (made by the test outside
    the sandbox: copies of cat, set-uid root or with a file capability) on
    its own /proc/self/status and on "secret", a file only root may read.
    Answers the ids, capabilities and no_new_privs each program had, what
    it read of the secret, and the stub's own."""
    with open("/proc/self/status") as f:
        own = status_fields(f.read())
    ran = {}
    for name, program in sorted(ctx["programs"].items()):
        status = run_program([program, "/proc/self/status"])
        secret = run_program([program, ctx["secret"]])
        ran[name] = {
            "status": status_fields(status["out"]),
            "status_error": status["error"],
            "read": secret["out"],
            "error": secret["error"],
        }
        t.tries.append({"what": f"run {program}", "errno": 0, "error": ""})
    return {"own": own, "ran": ran}


def metadata_outside_scratch(t: Tries, ctx: dict, model) -> None:
    """chown (to the ids it has), utime, rename and link on what the stub
    may read but not write: refused as writes are."""
    config = os.path.join(model.repository, "config.pbtxt")
    st = os.stat(config)
    t.run(f"chown {config} (same ids)", os.chown, config, st.st_uid, st.st_gid)
    t.run(f"utime {config}", os.utime, config, None)
    t.run(f"rename {config}", os.rename, config, config + ".moved")
    t.run("link /bin/true into /usr/bin", os.link, "/bin/true", f"/usr/bin/escape-{ctx['token']}")
    stdlib = os.path.dirname(os.__file__)
    t.run(f"utime {stdlib}/os.py", os.utime, os.path.join(stdlib, "os.py"), None)


ATTEMPTS = (
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
    symlink_through_scratch,
    hardlink_through_scratch,
    proc_fd_reopen,
    setuid_file_for_host,
    dev_shm_seen_by_host,
    tmp_seen_by_host,
    mknod_device,
    exec_from_tmp,
    metadata_outside_scratch,
    privileged_programs,
)
