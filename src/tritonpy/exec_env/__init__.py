# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Execution environments: the ``EXECUTION_ENV_PATH`` of a model turned into
the interpreter, and the environment variables, that run its stubs.

The backend runs ``python -m tritonpy.exec_env`` with its own interpreter
(``python-executable``) once per model load, before any stub starts. It
prints one JSON object on stdout, or an error on stderr and exits with 2.

``EXECUTION_ENV_PATH`` names a directory holding a Python installation (a
conda environment, a virtual environment) or a tar archive of one
(conda-pack output; gzip, bzip2, xz or plain). Archives are unpacked into a
private cache directory, once per content: a reload, or another model naming
the same bytes, reuses the unpacked tree. Unpacking refuses any member that
could write outside its directory (absolute paths, ``..``, links leading out,
devices, FIFOs) and fails the load naming it, and stops at limits on the
bytes unpacked, the member count and the compression ratio (``Limits``).
An unpacked tree is made read-only and its manifest (every entry's type,
mode, size, times and inode) is written beside it; a tree that no longer
matches its manifest is unpacked again before it is used.

As the official backend did up to r24.10, the environment's ``bin/activate``
(if any) is sourced by bash (upstream's current backend only sets the
variables a virtualenv's script would; docs/migration.md says why tritonpy
keeps running it), and what it set and removed is what its stubs get,
with the environment's ``lib/`` first on ``LD_LIBRARY_PATH`` (the stub
takes that entry off the variable again once it runs: see
``tritonpy.stub.main``).

The stub needs tritonpy: either the environment has it installed, or its
Python has the same minor version as the backend's interpreter, in which case
tritonpy (and uvloop, if the environment lacks it) is lent to it through
``PYTHONPATH``; numpy must then come from the environment.

The work is in three parts: ``extract`` (safe unpacking), ``cache`` (the
content-addressed cache of unpacked trees) and ``probe`` (the interpreter
and the variables its stubs get).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from . import probe
from .cache import default_cache_dir, prepare_cache_dir, unpack
from .extract import EnvError, Limits, within
from .probe import stub_environment

__all__ = ["EnvError", "Limits", "confine", "main", "prepare", "resolve_path"]

MODEL_DIR_VAR = "$$TRITON_MODEL_DIRECTORY"


def resolve_path(value: str, model_dir: str) -> Path:
    """``EXECUTION_ENV_PATH`` as a path. ``$$TRITON_MODEL_DIRECTORY`` at its
    start stands for the model's directory, and the result must stay inside
    it; any other value must be absolute."""
    if value.startswith(MODEL_DIR_VAR):
        root = os.path.normpath(model_dir)
        path = os.path.normpath(root + value[len(MODEL_DIR_VAR) :])
        if not within(path, root):
            raise EnvError(f"{path} is outside the model directory {root}")
        return Path(path)
    if not os.path.isabs(value):
        raise EnvError(f"must be an absolute path or start with {MODEL_DIR_VAR}")
    return Path(value)


def confine(path: Path, readable: list[str]) -> Path:
    """The real path of a sandboxed model's environment, which must lie in
    one of ``readable``: what its stubs may read anyway (the model's own
    directories, stub-sandbox-read-paths). Otherwise the model would open
    any directory of the host to its stubs, or have the backend unpack any
    archive for them, by naming it; a link in the model's directory counts
    where it leads. The error is the same for a path that is not there, and
    does not say where a link leads: the model learns nothing of the host
    from it."""
    try:
        real = os.path.realpath(path, strict=True)
    except OSError:
        real = ""
    if not real or not any(within(real, os.path.realpath(root)) for root in readable):
        raise EnvError(
            f"it is not in what the model's sandboxed stubs may read "
            f"({', '.join(readable)}): a sandboxed model's environment must lie in its own "
            "directory or under stub-sandbox-read-paths"
        )
    return Path(real)


def prepare(
    value: str,
    model_dir: str,
    cache_dir: str | None,
    limits: Limits = Limits(),
    readable: list[str] | None = None,
) -> dict[str, Any]:
    """Everything the backend needs to start the stubs of a model whose
    ``EXECUTION_ENV_PATH`` is ``value``; ``readable``: a sandboxed model's
    (``confine``)."""
    path = resolve_path(value, model_dir)
    if readable is not None:
        path = confine(path, readable)
    if not path.exists():
        raise EnvError(f"{path} does not exist")
    start = time.monotonic()
    extracted = False
    changed = None
    cache = prepare_cache_dir(Path(cache_dir) if cache_dir else default_cache_dir())
    if path.is_dir():
        root = path.resolve()
    else:
        root, extracted, changed = unpack(path, cache, limits)
    result = stub_environment(root, cache, unpacked=not path.is_dir())
    result.update(
        path=str(path),
        archive=not path.is_dir(),
        extracted=extracted,
        changed=changed,
        seconds=round(time.monotonic() - start, 3),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonpy.exec_env",
        description="Prepares a model's execution environment (EXECUTION_ENV_PATH) for "
        "tritonpy's stubs. Run by the backend when a model loads.",
    )
    parser.add_argument("--path", required=True, help="the EXECUTION_ENV_PATH parameter")
    parser.add_argument("--model-dir", required=True, help="the model's directory")
    parser.add_argument("--cache-dir", default="", help="where archives are unpacked")
    default = Limits()
    for name, what in (
        ("max-bytes", "bytes of tar stream unpacked"),
        ("max-members", "members"),
        ("max-ratio", "decompressed bytes per archive byte"),
    ):
        field = name.replace("-", "_")
        parser.add_argument(
            f"--{name}",
            type=int,
            default=getattr(default, field),
            help=f"at most this many {what} per archive; 0: no limit (env-unpack-{name})",
        )
    parser.add_argument(
        "--probe-timeout",
        type=float,
        default=probe.PROBE_TIMEOUT,
        help="seconds the environment's interpreter may take to answer (stub-timeout-seconds)",
    )
    parser.add_argument(
        "--within",
        action="append",
        default=None,
        help="(a sandboxed model) a directory its stubs may read, in one of which the "
        "environment must lie; repeated",
    )
    parser.add_argument(
        "--sandbox-real-uid",
        type=int,
        default=-1,
        help="(in the stub sandbox of a root server) the real uid the probed interpreter "
        "takes first, as stubs do",
    )
    args = parser.parse_args(argv)
    probe.PROBE_TIMEOUT = args.probe_timeout
    probe.SANDBOX_REAL_UID = args.sandbox_real_uid
    limits = Limits(
        max_bytes=args.max_bytes, max_members=args.max_members, max_ratio=args.max_ratio
    )
    try:
        result = prepare(args.path, args.model_dir, args.cache_dir or None, limits, args.within)
    except EnvError as e:
        print(e, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0
