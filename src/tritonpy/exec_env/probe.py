# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The environment's interpreter: found, asked what it can import, and
given the variables its stubs run with (lending it this installation's
tritonpy when it has none of its own)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import secrets
import selectors
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tritonpy

from .cache import prepare_cache_dir, remove_tree
from .extract import EnvError

# What the environment's interpreter is asked, in isolated mode (no
# PYTHONPATH, no user site-packages: what the stub itself will see).
_PROBE = (
    "import importlib.util as u, json, sys\n"
    "def has(m):\n"
    "    try:\n"
    "        return u.find_spec(m) is not None\n"
    "    except Exception:\n"
    "        return False\n"
    "print(json.dumps({'version': list(sys.version_info[:2]), 'prefix': sys.prefix,"
    " 'modules': {m: has(m) for m in ('tritonpy.stub', 'numpy', 'uvloop')}}))\n"
)
# How long the interpreter may take to answer: the backend passes
# stub-timeout-seconds (``--probe-timeout``).
PROBE_TIMEOUT = 30.0
# What is kept of each of its outputs.
_OUTPUT_LIMIT = 1 << 20
# In the stub sandbox of a root server (``--sandbox-real-uid``): the real
# uid the interpreter takes before it runs, as a stub does, so that the
# sandbox's process limit holds for it.
SANDBOX_REAL_UID = -1


def _as_a_stub() -> None:
    """In the probed interpreter's process, before it runs."""
    if SANDBOX_REAL_UID >= 0:
        from tritonpy.stub import _lifetime

        _lifetime.keep_real_uid(SANDBOX_REAL_UID)


def find_interpreter(root: Path) -> Path:
    for name in ("python3", "python"):
        candidate = root / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise EnvError(
        f"{root} has no bin/python3 or bin/python: an execution environment is a Python "
        "installation (a conda environment or virtual environment, or a conda-pack archive)"
    )


def _read_available(fd: int, sink: bytearray) -> bool:
    """Appends what the non-blocking ``fd`` holds to ``sink`` (up to
    _OUTPUT_LIMIT; the rest is dropped); False at its end."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        sink += chunk[: max(0, _OUTPUT_LIMIT - len(sink))]


def _exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (its process group's
    id stays reserved until then)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def run_bounded(args: list[str], timeout: float) -> tuple[int, str, str]:
    """Runs the untrusted program ``args`` (an environment's interpreter)
    with stdin from /dev/null, in a process group of its own that is killed
    as a whole when it ends or after ``timeout`` seconds, and answers its
    exit status, stdout and stderr. Waits for the process, never for the
    end of its pipes: a process it started that keeps them open does not
    hold the load up. Raises subprocess.TimeoutExpired."""
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_as_a_stub if SANDBOX_REAL_UID >= 0 else None,
    )
    assert proc.stdout is not None and proc.stderr is not None
    outputs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    deadline = time.monotonic() + timeout
    try:
        exit_fd = os.pidfd_open(proc.pid)  # readable once it has exited
    except (AttributeError, OSError):
        exit_fd = -1
    try:
        with selectors.DefaultSelector() as sel:
            for fd in outputs:
                os.set_blocking(fd, False)
                sel.register(fd, selectors.EVENT_READ)
            if exit_fd >= 0:
                sel.register(exit_fd, selectors.EVENT_READ)
            while not _exited(proc.pid):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(args, timeout)
                for key, _ in sel.select(left if exit_fd >= 0 else min(left, 0.05)):
                    if key.fd in outputs and not _read_available(key.fd, outputs[key.fd]):
                        sel.unregister(key.fd)
            for fd, sink in outputs.items():
                _read_available(fd, sink)
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        if exit_fd >= 0:
            os.close(exit_fd)
    out, err = (bytes(b).decode(errors="replace") for b in outputs.values())
    return proc.returncode, out, err


def probe(python: Path) -> dict[str, Any]:
    """Asks the environment's interpreter its version and which of the
    modules the stub needs it can import by itself."""
    try:
        returncode, stdout, stderr = run_bounded(
            [str(python), "-I", "-B", "-c", _PROBE], PROBE_TIMEOUT
        )
    except subprocess.TimeoutExpired as e:
        raise EnvError(
            f"{python} did not answer within {PROBE_TIMEOUT:g} s (stub-timeout-seconds): "
            "killed, with what it started"
        ) from e
    except OSError as e:
        raise EnvError(f"cannot run {python}: {e}") from e
    if returncode != 0:
        raise EnvError(f"{python} does not run (exit status {returncode}): {stderr.strip()[-800:]}")
    try:
        info: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        raise EnvError(f"{python} gave an unexpected answer: {stdout[-200:]!r}") from e
    return info


def lend_tritonpy(cache: Path, with_uvloop: bool) -> Path:
    """A directory holding links to this installation's tritonpy (and
    uvloop), put on the stub's PYTHONPATH; nothing else of this
    installation's site-packages is visible through it."""
    package = Path(tritonpy.__file__).resolve().parent
    if not (package / "stub").is_dir():
        raise EnvError(
            f"tritonpy at {package} is not a regular installation (editable?), so it "
            "cannot be lent to the environment: install tritonpy into the environment"
        )
    links = {"tritonpy": package}
    if with_uvloop:
        spec = importlib.util.find_spec("uvloop")
        if spec is not None and spec.submodule_search_locations:
            links["uvloop"] = Path(next(iter(spec.submodule_search_locations))).resolve()
    tag = json.dumps({k: str(v) for k, v in sorted(links.items())}).encode()
    version = f"py{sys.version_info[0]}.{sys.version_info[1]}"
    shim = cache / "lent" / f"{version}-{hashlib.sha256(tag).hexdigest()[:16]}"
    expected = {name: str(target) for name, target in links.items()}

    def intact() -> bool:
        # Exactly these links: what a model's code may have put there
        # instead would run in every stub it is lent to.
        try:
            if not stat.S_ISDIR(os.lstat(shim).st_mode):
                return False
            with os.scandir(shim) as it:
                return {e.name: os.readlink(e.path) for e in it} == expected
        except OSError:
            return False

    if intact():
        return shim
    prepare_cache_dir(cache)
    shim.parent.mkdir(mode=0o700, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".lent-", dir=shim.parent))
    for name, target in expected.items():
        os.symlink(target, staging / name)
    os.chmod(staging, 0o500)
    if os.path.lexists(shim) and not intact():
        aside = shim.parent / f".changed-{secrets.token_hex(4)}"
        with contextlib.suppress(OSError):
            os.rename(shim, aside)
            remove_tree(aside)
    try:
        os.rename(staging, shim)
    except OSError:  # another process made it first
        remove_tree(staging)
    if not intact():
        raise EnvError(f"{shim} keeps changing while it is made: load the model again")
    return shim


def stub_environment(root: Path, cache: Path, *, unpacked: bool = False) -> dict[str, Any]:
    """The interpreter of the environment at ``root`` and the variables its
    stubs get: PATH starts with the environment's bin/, PYTHONHOME and the
    server's PYTHONPATH are dropped (the environment is what the model sees,
    as with the official backend's stub), user site-packages are off. In an
    ``unpacked`` (read-only, checked) tree Python writes no bytecode: a
    stub running as root would write it anyway, and the tree would no
    longer match its manifest."""
    python = find_interpreter(root)
    info = probe(python)
    version = tuple(info.get("version", ()))
    modules = info.get("modules", {})
    variables = {
        "PATH": f"{root}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONNOUSERSITE": "1",
    }
    if unpacked:
        variables["PYTHONDONTWRITEBYTECODE"] = "1"
    unset = ["PYTHONHOME", "PYTHONPATH"]
    if not modules.get("tritonpy.stub"):
        ours = tuple(sys.version_info[:2])
        if version != ours:
            have = ".".join(map(str, version)) or "unknown"
            raise EnvError(
                f"its Python is {have} and has no tritonpy: install tritonpy into the "
                f"environment, or use Python {ours[0]}.{ours[1]} (the backend's "
                "python-executable), to which the backend lends its own tritonpy"
            )
        if not modules.get("numpy"):
            raise EnvError("it has no numpy, which tritonpy needs: install numpy into it")
        variables["PYTHONPATH"] = str(lend_tritonpy(cache, not modules.get("uvloop")))
        unset.remove("PYTHONPATH")
    return {
        "python": str(python),
        "root": str(root),
        "version": ".".join(map(str, version)),
        "lent": "PYTHONPATH" in variables,
        "set": variables,
        "unset": unset,
    }
