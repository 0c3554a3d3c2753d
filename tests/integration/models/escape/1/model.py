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

import json
import os
import socket
import sys

import escape_files
import escape_kernel
import numpy as np
import triton_python_backend_utils as pb_utils
from escape_tries import KEPT, TOKEN, Tries, create

# The network.


def connect_tcp(port: int, host: str = "127.0.0.1") -> dict:
    with socket.create_connection((host, port), timeout=10) as s:
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


def other_hosts(t: Tries, ctx: dict, model) -> None:
    """Beyond loopback: the host's own address (a listener of the test's
    there), a public address, a documentation one."""
    if ctx.get("host_ip"):
        t.run(
            f"TCP {ctx['host_ip']}:{ctx['host_ip_port']}",
            connect_tcp,
            ctx["host_ip_port"],
            ctx["host_ip"],
        )
    t.run("TCP 1.1.1.1:53", connect_tcp, 53, "1.1.1.1")
    t.run("TCP 192.0.2.1:80", connect_tcp, 80, "192.0.2.1")


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


ATTEMPTS = {
    f.__name__: f
    for f in (
        http_api,
        grpc_api,
        host_tcp_listener,
        other_hosts,
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
        *escape_files.ATTEMPTS,
        *escape_kernel.ATTEMPTS,
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
