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
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tritonpy

from .cache import prepare_cache_dir, remove_tree
from .extract import EnvError

# What the environment's interpreter is asked, in isolated mode (no
# PYTHONPATH, no user site-packages: what the stub itself will see), and
# the environment variables it runs with (after the activation script).
_PROBE = (
    "import importlib.util as u, json, os, sys\n"
    "def has(m):\n"
    "    try:\n"
    "        return u.find_spec(m) is not None\n"
    "    except Exception:\n"
    "        return False\n"
    "print(json.dumps({'version': list(sys.version_info[:2]), 'prefix': sys.prefix,"
    " 'modules': {m: has(m) for m in ('tritonpy.stub', 'numpy', 'uvloop')},"
    " 'environ': dict(os.environ)}))\n"
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


# Sources the environment's activation script, as the official backend does
# before each stub, then runs the probe in the environment it made. The
# positional parameters are cleared first: a sourced script sees its
# caller's, and activation scripts read theirs. Its output goes to stderr,
# which keeps stdout for the probe's answer.
_ACTIVATE = (
    "__tritonpy_activate=$1 __tritonpy_python=$2 __tritonpy_probe=$3; set --; "
    '. "$__tritonpy_activate" >&2 || { __tritonpy_status=$?; echo "tritonpy: sourcing '
    '$__tritonpy_activate failed with exit status $__tritonpy_status" >&2; '
    "exit $__tritonpy_status; }; "
    'exec "$__tritonpy_python" -I -B -c "$__tritonpy_probe"'
)

# Variables any bash sets or changes by itself: not the activation's doing.
_SHELL_OWN = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})

# Set on a stub whose LD_LIBRARY_PATH starts with the environment's lib/:
# the stub takes that entry off again before model code runs (see
# tritonpy.stub.main), as the official stub does. The dynamic loader read
# it at exec, so libraries in lib/ still load; processes the model starts
# get the library path without it.
LIB_MARK = "TRITONPY_EXEC_ENV_LIB"


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


def probe(python: Path, activate: Path | None = None) -> dict[str, Any]:
    """Asks the environment's interpreter its version, which of the
    modules the stub needs it can import by itself, and (``environ``) the
    variables it runs with once ``activate`` is sourced."""
    args = [str(python), "-I", "-B", "-c", _PROBE]
    what = str(python)
    if activate is not None:
        bash = shutil.which("bash")
        if bash is None:
            raise EnvError(f"{activate} must be sourced by bash, and there is no bash on PATH")
        args = [bash, "-c", _ACTIVATE, "tritonpy-activate", str(activate), str(python), _PROBE]
        what = f"{python} (after sourcing {activate})"
    try:
        returncode, stdout, stderr = run_bounded(args, PROBE_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise EnvError(
            f"{what} did not answer within {PROBE_TIMEOUT:g} s (stub-timeout-seconds): "
            "killed, with what it started"
        ) from e
    except OSError as e:
        raise EnvError(f"cannot run {what}: {e}") from e
    if returncode != 0:
        raise EnvError(f"{what} does not run (exit status {returncode}): {stderr.strip()[-800:]}")
    try:
        info: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        raise EnvError(f"{python} gave an unexpected answer: {stdout[-200:]!r}") from e
    return info


def _text(value: str) -> bool:
    # Not valid UTF-8 as bytes (Python decoded it with surrogate escapes):
    # the backend reads the answer as JSON text.
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def activation_changes(
    before: Mapping[str, str], after: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """What activation did to the environment ``before`` it: the variables
    it set or changed, and those it removed."""
    changed = {
        k: v
        for k, v in after.items()
        if k not in _SHELL_OWN and before.get(k) != v and _text(k) and _text(v)
    }
    removed = sorted(k for k in before if k not in after and k not in _SHELL_OWN and _text(k))
    return changed, removed


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
    stubs get, as with the official backend's stub: what sourcing the
    environment's ``bin/activate`` (if it has one) sets and removes, with
    the environment's ``lib/`` first on LD_LIBRARY_PATH. PATH starts with
    the environment's bin/ if activation left it alone. PYTHONHOME and the
    server's PYTHONPATH are dropped (the environment is what the model
    sees), unless activation set them; user site-packages are off. In an
    ``unpacked`` (read-only, checked) tree Python writes no bytecode: a
    stub running as root would write it anyway, and the tree would no
    longer match its manifest."""
    python = find_interpreter(root)
    activate = root / "bin" / "activate"
    info = probe(python, activate if activate.is_file() else None)
    version = tuple(info.get("version", ()))
    modules = info.get("modules", {})
    # The probe ran in the environment as activated; with no activation
    # script that is the server's, unchanged.
    after: dict[str, str] = info.get("environ") or dict(os.environ)
    variables, removed = activation_changes(os.environ, after)
    variables.setdefault("PATH", f"{root}/bin:{after.get('PATH', '/usr/bin:/bin')}")
    variables["PYTHONNOUSERSITE"] = "1"
    if unpacked:
        variables["PYTHONDONTWRITEBYTECODE"] = "1"
    lib = root / "lib"
    if lib.is_dir():
        # The loader reads it when the stub starts: a native extension finds
        # the shared libraries the environment ships beside its Python.
        rest = after.get("LD_LIBRARY_PATH", "")
        variables["LD_LIBRARY_PATH"] = f"{lib}:{rest}" if rest else str(lib)
        variables[LIB_MARK] = str(lib)
    unset = {"PYTHONHOME", "PYTHONPATH", *removed} - variables.keys()
    lent = False
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
        lent = True
        shim = str(lend_tritonpy(cache, not modules.get("uvloop")))
        own = variables.get("PYTHONPATH")
        variables["PYTHONPATH"] = f"{shim}:{own}" if own else shim
        unset.discard("PYTHONPATH")
    return {
        "python": str(python),
        "root": str(root),
        "version": ".".join(map(str, version)),
        "lent": lent,
        "activated": activate.is_file(),
        "set": variables,
        "unset": sorted(unset),
    }
