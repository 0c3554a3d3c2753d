# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Model code that tries the walls of the stub sandbox's files and
network. MODE with ARG (a path, an address or a name): "write" creates a
file in the directory ARG; "read" reads the file ARG; "list" lists the
directory ARG; "connect" opens a TCP connection to ARG (host:port);
"abstract" binds and then connects to the abstract unix socket ARG;
"chmod" sets the mode the file ARG has; "loopback" connects to a listener of its own on 127.0.0.1; "device"
writes a byte to the device ARG;
"fill" writes into the directory ARG until refused and answers how much;
"where" answers TMPDIR, the network interfaces, what the model's own
directory is, its path and capabilities. Each answers {"ok": ...} or {"error": "<errno name>: ..."}
as JSON."""

import errno
import json
import os
import socket
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


def failure(e: OSError) -> dict:
    return {"error": f"{errno.errorcode.get(e.errno or 0, '?')}: {e}"}


def write(directory: str) -> dict:
    path = os.path.join(directory, f"planted_{os.getpid()}.py")
    with open(path, "w") as f:
        f.write("planted = True\n")
    os.unlink(path)
    return {"ok": path}


def put(path: str) -> dict:
    """Writes ``path`` and leaves it (the test looks for it)."""
    with open(path, "w") as f:
        f.write(f"written by {os.getpid()}\n")
    return {"ok": path}


def cat(path: str) -> dict:
    with open(path) as f:
        return {"ok": f.read()}


def read(path: str) -> dict:
    with open(path, "rb") as f:
        return {"ok": len(f.read(4096))}


def connect(address: str) -> dict:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5):
        return {"ok": address}


def abstract(name: str) -> dict:
    """Binding a name of its own works in any network namespace; reaching
    the host's is what the sandbox stops: answers the connect."""
    mine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mine.bind(f"\0{name}-probe-{os.getpid()}")
    mine.close()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(f"\0{name}")
        return {"ok": name}


def loopback(_: str) -> dict:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        return connect(f"127.0.0.1:{listener.getsockname()[1]}")


def device(path: str) -> dict:
    with open(path, "wb") as f:
        f.write(b"x")
    return {"ok": path}


def chmod(path: str) -> dict:
    """Sets the mode ``path`` already has (changes nothing if allowed)."""
    os.chmod(path, os.stat(path).st_mode & 0o7777)
    return {"ok": path}


def fill(directory: str) -> dict:
    path = os.path.join(directory, "fill")
    chunk = b"\0" * (1 << 20)
    done = 0
    try:
        with open(path, "wb") as f:
            while done < (1 << 34):
                f.write(chunk)
                f.flush()
                done += len(chunk)
    except OSError as e:
        return {"written": done, **failure(e)}
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return {"written": done}


def capabilities() -> dict:
    with open("/proc/self/status") as f:
        fields = dict(line.split(":\t", 1) for line in f if line.startswith("Cap"))
    return {k: int(v, 16) for k, v in fields.items()}


def where() -> dict:
    return {
        "tmpdir": os.environ.get("TMPDIR", ""),
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "model_dir": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        "path": sys.path,
        "capabilities": capabilities(),
    }


MODES = {"write": write, "read": read, "list": os.listdir, "connect": connect}
MODES.update(abstract=abstract, fill=fill, loopback=loopback, device=device, chmod=chmod)
MODES.update(put=put, cat=cat)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            arg_tensor = pb_utils.get_input_tensor_by_name(request, "ARG")
            arg = "" if arg_tensor is None else arg_tensor.as_numpy()[0].decode()
            try:
                if mode == "where":
                    out = where()
                else:
                    result = MODES[mode](arg)
                    out = result if isinstance(result, dict) else {"ok": result}
            except OSError as e:
                out = failure(e)
            data = np.array([json.dumps(out).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        return responses
