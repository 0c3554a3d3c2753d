# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The CPython interpreters of this machine that tritonpy supports, and a
virtual environment per interpreter with tritonpy installed from this tree
(the stub side only), for tests/integration/test_pythons.py.

Interpreters are looked for in pyenv's versions directory ($PYENV_ROOT,
else ~/.pyenv) and as python3.N on PATH; each is asked what it is, and the
first found of each minor version is kept (the suite's own interpreter for
its minor). The environments live in build/pythons/<minor>/ and are
rebuilt when this tree's Python sources, the build mode or the interpreter
change, so a rerun reuses them."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENVS = ROOT / "build" / "pythons"
# The versions docs/environments.md says are tested; only used to say which
# of them this machine lacks.
DOCUMENTED = ("3.10", "3.11", "3.12", "3.13")
# What the build of a stub environment depends on (the backend is left out).
SOURCE_DIRS = ("src",)
SOURCE_FILES = ("setup.py", "pyproject.toml", "MANIFEST.in")
SOURCE_SUFFIXES = (".py", ".pyx", ".pxd", ".pyi", ".typed")

_PROBE = """
import importlib.util, json, os, sys, sysconfig
print(json.dumps({
    "implementation": sys.implementation.name,
    "version": list(sys.version_info[:3]),
    "executable": os.path.realpath(sys.executable),
    "venv": sys.prefix != sys.base_prefix,
    "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    "ensurepip": importlib.util.find_spec("ensurepip") is not None,
}))
"""


@dataclass(frozen=True)
class Python:
    executable: str  # real path of the interpreter
    version: tuple[int, int, int]
    own: bool  # the interpreter running the suite

    @property
    def minor(self) -> str:
        return ".".join(map(str, self.version[:2]))

    @property
    def full(self) -> str:
        return ".".join(map(str, self.version))


def minimum() -> tuple[int, int]:
    """requires-python of pyproject.toml (">=3.10")."""
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)"', text, re.M)
    assert m, 'pyproject.toml: no requires-python = ">=X.Y"'
    return int(m.group(1)), int(m.group(2))


def _candidates() -> list[str]:
    found = []
    roots = [os.environ.get("PYENV_ROOT"), os.path.expanduser("~/.pyenv")]
    for root in dict.fromkeys(r for r in roots if r):
        found += sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python3")))
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        for path in sorted(glob.glob(os.path.join(folder or ".", "python3.*"))):
            if re.fullmatch(r"python3\.\d+", os.path.basename(path)):
                found.append(path)
    return found


def _probe(path: str) -> dict | None:
    try:
        out = subprocess.run(
            [path, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
        )
        info: dict = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None  # not runnable (a pyenv shim of a version not installed, ...)
    return info


_found: tuple[list[Python], list[str]] | None = None


def discover() -> tuple[list[Python], list[str]]:
    """The interpreters to test, one per minor version from requires-python
    on, oldest first; and notes on interpreters found but left out."""
    global _found
    if _found is not None:
        return _found
    own = Python(os.path.realpath(sys.executable), tuple(sys.version_info[:3]), own=True)
    chosen: dict[str, Python] = {own.minor: own}
    notes: list[str] = []
    seen = {own.executable}
    for path in _candidates():
        info = _probe(path)
        # A virtual environment (pyenv-virtualenv's among the versions) is
        # left to its base interpreter, found on its own.
        if info is None or info["venv"] or info["executable"] in seen:
            continue
        seen.add(info["executable"])
        python = Python(info["executable"], tuple(info["version"]), own=False)
        if (
            info["implementation"] != "cpython"
            or python.version[:2] < minimum()
            or python.minor in chosen
        ):
            continue
        if info["free_threaded"] or not info["ensurepip"]:
            why = "free-threaded build" if info["free_threaded"] else "no ensurepip (venv)"
            notes.append(f"{python.full} at {python.executable} left out: {why}")
            continue
        chosen[python.minor] = python
    _found = (sorted(chosen.values(), key=lambda p: p.version), notes)
    return _found


def summary(outcomes: dict[str, str]) -> str:
    """One line for the end of the test run. ``outcomes``: test outcome by
    full version, for the versions whose test ran."""
    pythons, notes = discover()
    parts = []
    for p in pythons:
        outcome = outcomes.get(p.full, "not run")
        own = " (the suite's own)" if p.own else ""
        parts.append(f"{p.full}{own} {outcome}")
    have = {p.minor for p in pythons}
    missing = [v for v in DOCUMENTED if v not in have]
    line = "stub on each Python: " + ", ".join(parts)
    line += "; not found here: " + (", ".join(missing) if missing else "none")
    if len(pythons) == 1:
        line += "; no Python but the suite's own was found: only it was covered"
    return "; ".join([line, *notes])


def _source_key(python: Python) -> str:
    h = hashlib.sha256()
    h.update(f"{python.executable} {python.full}\n".encode())
    h.update(f"debug={os.environ.get('TRITONPY_DEBUG', '') not in ('', '0')}\n".encode())
    files = [ROOT / f for f in SOURCE_FILES]
    for folder in SOURCE_DIRS:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in SOURCE_SUFFIXES]
    for path in sorted(files):
        if path.is_file():
            h.update(f"{path.relative_to(ROOT)}\n".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    ENVS.mkdir(parents=True, exist_ok=True)
    with open(ENVS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def stub_environment(python: Python) -> Path:
    """The interpreter of a virtual environment of ``python`` holding
    tritonpy from this tree and its dependencies, made (or reused) in
    build/pythons/<minor>/. It is what a user does for an environment that
    runs stubs: ``pip install`` of the tree with TRITONPY_STUB_ONLY=1 (build
    requirements, numpy and uvloop come from the package index pip is set
    up with, as for `make setup`)."""
    dest = ENVS / python.minor
    stamp = dest / ".tritonpy-key"
    key = _source_key(python)
    with _locked():
        if stamp.is_file() and stamp.read_text() == key:
            return dest / "bin" / "python"
        shutil.rmtree(dest, ignore_errors=True)
        log = ENVS / f"build-{python.minor}.log"
        env = {**os.environ, "TRITONPY_STUB_ONLY": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        steps = [
            [python.executable, "-m", "venv", str(dest)],
            [str(dest / "bin" / "python"), "-m", "pip", "install", str(ROOT)],
        ]
        with open(log, "w") as out:
            for cmd in steps:
                out.write(f"$ {' '.join(cmd)}\n")
                out.flush()
                code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
                if code != 0:
                    tail = log.read_text(errors="replace")[-4000:]
                    raise RuntimeError(f"{' '.join(cmd)} exited with {code} ({log}):\n{tail}")
        stamp.write_text(key)
    return dest / "bin" / "python"
