# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Model code that starts processes and goes after the server. MODE:
"spawn" starts `sleep 3600` and answers its pid; "escape" one that leaves
the stub's process group; "exit" ends the stub;
"hold_gil" starts a sleeper, then holds the GIL in a regular expression
that never ends; "forkbomb" forks until the kernel refuses (every process
forks too) and answers how far it got; "kill_server" sends SIGKILL to its
parent and to the pid in ARG (its own server: never to other servers on
the machine, should the sandbox fail);
"facts" answers what the stub sees of itself; "allocate" reserves ARG
bytes (np.empty: address space, no page touched) and answers the size,
or fails its request with the MemoryError; "child_limits" the
address-space limit a program it starts reads in its /proc/self/limits;
"env" the names of its environment variables; "descriptors" what each
of its descriptors is and which of them lets it signal a process or take
its descriptors (a pidfd);
"load_loose" loads, through pb_utils.load_model, a model whose config
switches the sandbox off and raises its process limit, and answers the
error; "linger" passes the backend, as an arena, a TCP socket to the port
in ARG with unsent data and a long SO_LINGER (its close would block).
Answers are JSON."""

import ctypes
import json
import os
import re
import resource
import select
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def spawn() -> dict:
    sleeper = subprocess.Popen(["sleep", "3600"])
    return {"stub": os.getpid(), "child": sleeper.pid}


def forkbomb() -> dict:
    """Each process forks until refused, then sleeps; the stub answers
    how many children it made itself and the refusal. Only as pid 1 of a
    pid namespace (in the sandbox): elsewhere nothing would stop it."""
    if os.getpid() != 1:
        return {"stub": os.getpid(), "made": 0, "error": "not sandboxed: not run"}
    made = 0
    error = ""
    while made < 100000:
        try:
            pid = os.fork()
        except OSError as e:
            error = str(e)
            break
        if pid == 0:  # a child: fork on, then hold its slot
            try:
                while True:
                    if os.fork() == 0:
                        continue
            except OSError:
                pass
            time.sleep(3600)
            os._exit(0)
        made += 1
    return {"stub": os.getpid(), "made": made, "error": error}


def kill_server(target: int) -> dict:
    tried = {}

    def attempt(what: str, pid: int) -> None:
        try:
            os.kill(pid, 9)
            tried[what] = "sent"
        except OSError as e:
            tried[what] = str(e)

    ppid = os.getppid()
    if ppid > 0:
        attempt(f"parent {ppid}", ppid)
    if target > 0:
        attempt(f"server pid {target}", target)
    return tried


def facts() -> dict:
    status = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value.strip()
    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "uid": os.getuid(),
        "no_new_privs": status.get("NoNewPrivs"),
        "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
        "as": resource.getrlimit(resource.RLIMIT_AS)[0],
        "vm": int(status["VmSize"].split()[0]) << 10,  # address space in use
        "visible_pids": sorted(int(e) for e in os.listdir("/proc") if e.isdigit()),
        "back_to_root": back_to_root(),
    }


def allocate(nbytes: int) -> dict:
    block = np.empty(nbytes, np.uint8)  # MemoryError past RLIMIT_AS
    return {"allocated": block.nbytes}


def child_limits() -> dict:
    """The address-space limit of a program the model runs, as the
    program's /proc/self/limits says it ("unlimited" or bytes)."""
    limits = subprocess.run(["cat", "/proc/self/limits"], capture_output=True, check=True)
    for line in limits.stdout.decode().splitlines():
        if line.startswith("Max address space"):
            return {"child_as": line.split()[3]}
    return {"child_as": ""}


def back_to_root() -> str:
    """Tries to make the real uid root again (which RLIMIT_NPROC exempts)."""
    try:
        os.setresuid(0, 0, 0)
    except OSError as e:
        return str(e)
    return "done"


SYS_PIDFD_SEND_SIGNAL = 424
SYS_PIDFD_GETFD = 438


def descriptors() -> dict:
    """Every descriptor, and whether it lets this process signal another or
    take another's descriptors (what a pidfd of the server allowed)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    out = {}
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        fd = int(name)
        try:
            what = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, gone
        reaches = []
        if libc.syscall(SYS_PIDFD_SEND_SIGNAL, fd, 0, None, 0) == 0:
            reaches.append("signal")
        for target in range(64):
            taken = libc.syscall(SYS_PIDFD_GETFD, fd, target, 0)
            if taken >= 0:
                os.close(taken)
                reaches.append(f"took fd {target}")
                break
        out[str(fd)] = {"is": what, "reaches": reaches}
    return out


LOOSE_CONFIG = {
    "backend": "tritonpy",
    "max_batch_size": 0,
    "input": [{"name": "MODE", "data_type": "TYPE_STRING", "dims": [1]}],
    "output": [{"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]}],
    "parameters": {
        "stub_sandbox": {"string_value": "false"},
        "stub_sandbox_max_processes": {"string_value": "100000"},
    },
}


def load_loose() -> dict:
    with open(__file__, "rb") as f:
        source = f.read()
    try:
        pb_utils.load_model(
            "hostile_loose", config=json.dumps(LOOSE_CONFIG), files={"file:1/model.py": source}
        )
    except Exception as e:
        return {"error": str(e)}
    return {"error": ""}


def linger(port: int) -> dict:
    """A socket whose last close blocks: connected to a listener that never
    reads, its buffers full of unsent data, SO_LINGER one hour."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    s.setblocking(False)
    unsent = 0
    stalled = 0  # rounds without room: the peer's window is closed
    while stalled < 3:
        try:
            unsent += s.send(b"x" * 65536)
            stalled = 0
        except BlockingIOError:
            if not select.select([], [s], [], 0.2)[1]:
                stalled += 1
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
    sys.path.insert(0, os.environ["TRITONPY_TESTS_DIR"])
    import hostile

    # Frames that keep the reader busy for a while, so that the stub has
    # closed its own copy of the socket before the reader gets to it: the
    # reader's close is then the last, the one that lingers.
    text = "hostile_proc: keeping the reader busy " + "x" * 120000
    log = hostile.ref.encode(hostile.ref.LOG, {"level": 0, "file": "", "line": 0, "message": text})
    arena = hostile.ref.encode(hostile.ref.ARENA, {"arena_id": 0x20000, "size": 4096})
    passed = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", s.fileno()))]
    with hostile.stub_socket() as channel:  # non-blocking, as the stub's
        for frame, ancillary in [*((log, []) for _ in range(40)), (arena, passed)]:
            while True:
                try:
                    channel.sendmsg([frame], ancillary)
                    break
                except BlockingIOError:
                    select.select([], [channel], [], 5)
    os.close(s.detach())  # the backend holds the last reference now
    return {"sent": unsent}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            arg = pb_utils.get_input_tensor_by_name(request, "ARG")
            target = int(arg.as_numpy()[0]) if arg is not None else 0
            if mode == "spawn":
                out = spawn()
            elif mode == "escape":
                # A sleeper in a session (and process group) of its own.
                out = {"child": subprocess.Popen(["sleep", "3600"], start_new_session=True).pid}
            elif mode == "exit":
                os._exit(3)
            elif mode == "hold_gil":
                out = spawn()
                print(f"hostile_proc: holding the GIL, sleeper {out['child']}", flush=True)
                sys.stdout.flush()
                re.match(r"(a+)+$", "a" * 64 + "b")  # never returns
            elif mode == "forkbomb":
                out = forkbomb()
            elif mode == "kill_server":
                out = kill_server(target)
            elif mode == "facts":
                out = facts()
            elif mode == "allocate":
                out = allocate(target)
            elif mode == "child_limits":
                out = child_limits()
            elif mode == "env":
                out = sorted(os.environ)
            elif mode == "descriptors":
                out = descriptors()
            elif mode == "load_loose":
                out = load_loose()
            elif mode == "linger":
                out = linger(target)
            else:
                raise pb_utils.TritonModelException(f"unknown MODE {mode!r}")
            text = np.array([json.dumps(out).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", text)]))
        return responses
