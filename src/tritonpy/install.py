# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Where things are: the backend library shipped in this package, backend
directories assembled from it, and the tritonserver to run."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import tritonpy


def _library_path() -> Path:
    """The backend library in the first folder of the package that holds it:
    the installation's, also when a checkout's tritonpy/ comes first (see
    tritonpy/__init__.py)."""
    paths = [Path(d) / "_backend" / "libtriton_tritonpy.so" for d in tritonpy.__path__]
    return next((p for p in paths if p.is_file()), paths[0])


LIBRARY = _library_path()
CONF_NAME = "tritonpy.conf"
# Where `make serve` / `make test` put the tritonserver of the nvidia-pytriton
# wheel (`pip install --no-deps --target <venv>/tritonserver nvidia-pytriton`).
WHEEL_SERVER = Path(sys.prefix) / "tritonserver" / "pytriton" / "tritonserver"


class InstallError(RuntimeError):
    pass


def library() -> Path:
    if not LIBRARY.is_file():
        raise InstallError(
            f"the backend library is missing at {LIBRARY}: reinstall tritonpy "
            "(pip install .) so that CMake builds it, without TRITONPY_STUB_ONLY=1"
        )
    return LIBRARY


def install(
    backends_dir: str | os.PathLike[str], name: str = "tritonpy", python: str | None = None
) -> Path:
    """Install the backend as ``<backends_dir>/<name>/libtriton_<name>.so``.

    ``name`` is ``tritonpy`` for models that say ``backend: "tritonpy"``, or
    ``python`` to replace the official Python backend for unchanged models.
    A ``tritonpy.conf`` beside the library names the interpreter that runs the
    stub (``python-executable``); ``--backend-config`` still overrides it.
    """
    if not name or "/" in name or name in (".", ".."):
        raise InstallError(f"bad backend name {name!r}")
    dest = Path(backends_dir) / name
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / f"libtriton_{name}.so"
    tmp = dest / f".libtriton_{name}.so.tmp"
    shutil.copy2(library(), tmp)
    os.replace(tmp, target)  # atomic: a running server keeps its mapping
    conf = dest / CONF_NAME
    conf.write_text(
        "# written by `tritonpy install`; --backend-config overrides these\n"
        f"python-executable={python or sys.executable}\n"
    )
    return dest


def backend_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """A ready ``--backend-directory`` holding tritonpy as ``tritonpy`` and as
    the drop-in ``python``, refreshed from this installation."""
    base = Path(root) if root else default_backend_root()
    for name in ("tritonpy", "python"):
        install(base, name)
    return base


def default_backend_root() -> Path:
    env = os.environ.get("TRITONPY_BACKEND_DIR")
    if env:
        return Path(env)
    candidate = Path(sys.prefix) / "tritonpy-backends"
    if os.access(sys.prefix, os.W_OK):
        return candidate
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "tritonpy" / "backends"


def tritonserver() -> Path:
    """The tritonserver binary: $TRITONSERVER, the nvidia-pytriton wheel's
    server installed beside this interpreter, or `tritonserver` on PATH
    (e.g. /opt/tritonserver/bin in NGC containers)."""
    env = os.environ.get("TRITONSERVER")
    if env:
        return Path(env)
    wheel = WHEEL_SERVER / "bin" / "tritonserver"
    if wheel.is_file():
        return wheel
    found = shutil.which("tritonserver") or (
        "/opt/tritonserver/bin/tritonserver"
        if os.path.isfile("/opt/tritonserver/bin/tritonserver")
        else None
    )
    if found:
        return Path(found)
    raise InstallError(
        "no tritonserver found: set TRITONSERVER=/path/to/tritonserver, or install the one "
        f"from PyPI with `pip install --no-deps --target {WHEEL_SERVER.parent.parent} "
        "nvidia-pytriton==0.7.0` (what `make serve` does)"
    )
