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
import shutil
import stat
import subprocess
import sys
import tempfile
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
PROBE_TIMEOUT = 120.0

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
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvError(f"cannot run {what}: {e}") from e
    if proc.returncode != 0:
        raise EnvError(
            f"{what} does not run (exit status {proc.returncode}): {proc.stderr.strip()[-800:]}"
        )
    try:
        info: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        raise EnvError(f"{python} gave an unexpected answer: {proc.stdout[-200:]!r}") from e
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
