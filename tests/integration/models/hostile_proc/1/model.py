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
"facts" answers what the stub sees of itself; "env" the names of its
environment variables. Answers are JSON."""

import json
import os
import re
import resource
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
        "visible_pids": sorted(int(e) for e in os.listdir("/proc") if e.isdigit()),
        "back_to_root": back_to_root(),
    }


def back_to_root() -> str:
    """Tries to make the real uid root again (which RLIMIT_NPROC exempts)."""
    try:
        os.setresuid(0, 0, 0)
    except OSError as e:
        return str(e)
    return "done"


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
            elif mode == "env":
                out = sorted(os.environ)
            else:
                raise pb_utils.TritonModelException(f"unknown MODE {mode!r}")
            text = np.array([json.dumps(out).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", text)]))
        return responses
