# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Says what its stub process is: ids, group, descriptors, environment,
argv, path, sandbox, random state, multiprocessing's authkey, OpenBLAS's
threads. For tests that compare a stub forked
from the template with an exec'd one (test_stub_fork.py)."""

import ctypes
import json
import multiprocessing
import os
import random
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

# At import, as a model sees it.
ARGV = list(sys.argv)
PATH = list(sys.path)


def _mark_import():
    """Where the model's directory holds a file ``import_marker_dir``
    (naming a directory of the host's): a file there, named after the
    model and this pid, says the import ran where that directory is
    writable. What happened, for ``execute`` to tell; None without it."""
    model_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        with open(os.path.join(model_dir, "import_marker_dir")) as f:
            where = f.read().strip()
    except OSError:
        return None
    marker = os.path.join(where, f"{os.path.basename(model_dir)}-{os.getpid()}")
    try:
        with open(marker, "x") as f:
            f.write(_read("/proc/self/status"))
    except OSError as e:
        return {"pid": os.getpid(), "marker": "", "error": f"{e.errno} {e.strerror}"}
    return {"pid": os.getpid(), "marker": marker, "error": ""}


def _status(*keys):
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in keys:
                out[key] = value.split()
    return out


def _blas_threads():
    """OpenBLAS's thread count, as the loaded library reports it (None
    without OpenBLAS)."""
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if "openblas" in line and ".so" in line})
    for path in paths:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                return int(fn())
    return None


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return f"error {e.errno}"


IMPORTED = _mark_import()


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]
        # Each stub's own (the model's import ran once, in its template).
        self.random = random.random()
        self.numpy_random = float(np.random.random())
        # Threads once loaded, before any BLAS call of this stub's.
        self.threads_at_load = int(_status("Threads")["Threads"][0])

    def execute(self, requests):
        if int(requests[0].inputs()[0].as_numpy()[0]) == 3:
            os._exit(3)  # a crash: the stub restarts
        # A product big enough for OpenBLAS to split: its threads run.
        a = np.ones((512, 512))
        product = float((a @ a)[0, 0])
        fds = {}
        for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
            try:
                fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                pass  # the listing's own descriptor
        info = {
            "instance": self.name,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "pgid": os.getpgid(0),
            "sid_is_own": os.getsid(0) == os.getpid(),
            "uids": list(os.getresuid()),
            "gids": list(os.getresgid()),
            "fds": {str(k): v.split(":[")[0] for k, v in fds.items()},
            "env": sorted(os.environ),
            "argv": ARGV,
            "path": PATH,
            "cwd": os.getcwd(),
            "random": self.random,
            "numpy_random": self.numpy_random,
            "authkey": multiprocessing.current_process().authkey.hex(),
            "status": _status("NoNewPrivs", "Seccomp", "SigBlk", "SigIgn", "Threads"),
            "uid_map": _read("/proc/self/uid_map"),
            "limits": _read("/proc/self/limits"),
            "cmdline": _read("/proc/self/cmdline").split("\0"),
            "ns_pid": os.readlink("/proc/self/ns/pid"),
            "ns_user": os.readlink("/proc/self/ns/user"),
            "ns_mnt": os.readlink("/proc/self/ns/mnt"),
            "forked": "tritonpy.stub.template" in sys.modules,
            "blas_env": os.environ.get("OPENBLAS_NUM_THREADS"),
            "blas_threads": _blas_threads(),
            "blas_product": product,
            "threads_at_load": self.threads_at_load,
        }
        if IMPORTED is not None:
            info["imported"] = IMPORTED
        out = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
