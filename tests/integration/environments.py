# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Building execution environments for the tests (no network): virtual
environments of this Python, one laid out as conda-pack lays out a conda
environment (activation scripts, a native extension linking a library in
the environment's lib/), tar.gz archives of them (with hand-made members,
for hostile archives), and copies of the env_info model pointing
EXECUTION_ENV_PATH at them."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path
from typing import Any

import tritonpy

from server import MODELS, TritonServer

__all__ = [
    "ENV_INFO",
    "IN_MODEL_DIR",
    "LNK",
    "REG",
    "SITE",
    "SYM",
    "Member",
    "conda_pack_env",
    "env_server",
    "make_venv",
    "numpy_only",
    "pack",
    "write_model",
]

SITE = Path(tritonpy.__file__).resolve().parents[1]  # site-packages holding tritonpy
ENV_INFO = MODELS / "env_info"
# EXECUTION_ENV_PATH of an archive copied into the model's directory.
IN_MODEL_DIR = "$$TRITON_MODEL_DIRECTORY/env.tar.gz"

REG, SYM, LNK = tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE
Member = tuple[str, bytes, str]  # name, tarfile type, link target


def make_venv(dest: Path, site: Path, *, copies: bool) -> Path:
    """A virtual environment of this Python without pip, seeing `site`
    through a .pth file. `copies`: real interpreter files instead of
    symbolic links to the base installation, so it can be archived."""
    args = [sys.executable, "-m", "venv", "--without-pip", str(dest)]
    subprocess.run(args + (["--copies"] if copies else []), check=True)
    site_packages = next((dest / "lib").glob("python3*/site-packages"))
    (site_packages / "extra-site.pth").write_text(f"{site}\n")
    return dest


# What conda-pack's bin/activate does, in short: the prefix is where the
# script is (wherever the archive was unpacked), its bin/ goes first on
# PATH, and the scripts packages put in etc/conda/activate.d are sourced.
CONDA_PACK_ACTIVATE = """\
_cp_prefix=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CONDA_PREFIX="$_cp_prefix"
export CONDA_DEFAULT_ENV="$_cp_prefix"
export PATH="$_cp_prefix/bin:$PATH"
for _cp_script in "$_cp_prefix"/etc/conda/activate.d/*.sh; do
    if [ -f "$_cp_script" ]; then . "$_cp_script"; fi
done
unset _cp_prefix _cp_script
"""

# A package's activation script, as conda packages ship them: it points
# the package at its data in the environment.
GREET_ACTIVATE = """\
export TRITONPY_GREET_DATA="$CONDA_PREFIX/share/greet"
"""

GREET_LIB = """\
const char *tritonpy_greet(void) { return "hello from libtritonpy_greet"; }
"""

# A native extension linking libtritonpy_greet with no run path: it loads
# only where the environment's lib/ is on the loader's search path.
GREET_EXT = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>
const char *tritonpy_greet(void);
static PyObject *greet(PyObject *self, PyObject *args) {
  return PyUnicode_FromString(tritonpy_greet());
}
static PyMethodDef methods[] = {{"greet", greet, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "greet_ext", NULL, -1, methods};
PyMODINIT_FUNC PyInit_greet_ext(void) { return PyModule_Create(&module); }
"""


def conda_pack_env(dest: Path, site: Path) -> Path:
    """A copy-made virtual environment of this Python (seeing `site`)
    with what a conda-pack archive holds besides: bin/activate,
    bin/conda-unpack, conda-meta/, etc/conda/activate.d/, a shared library
    in lib/ and, in site-packages, the extension module greet_ext that
    links it. Built with the system's C compiler."""
    make_venv(dest, site, copies=True)
    (dest / "bin" / "activate").write_text(CONDA_PACK_ACTIVATE)
    unpack_script = dest / "bin" / "conda-unpack"
    unpack_script.write_text("#!/bin/sh\n# conda-pack: rewrites the prefix; nothing to do here\n")
    unpack_script.chmod(0o755)
    (dest / "conda-meta").mkdir()
    (dest / "conda-meta" / "history").write_text("==> 2026-01-01 00:00:00 <==\n")
    (dest / "conda-meta" / "greet-1.0-0.json").write_text('{"name": "greet", "version": "1.0"}\n')
    (dest / "etc" / "conda" / "activate.d").mkdir(parents=True)
    (dest / "etc" / "conda" / "activate.d" / "greet.sh").write_text(GREET_ACTIVATE)
    (dest / "share" / "greet").mkdir(parents=True)
    build = dest.parent / f"{dest.name}-build"
    build.mkdir()
    (build / "greet.c").write_text(GREET_LIB)
    (build / "greet_ext.c").write_text(GREET_EXT)
    lib = dest / "lib"
    cc = shutil.which("cc") or "cc"
    soname = "libtritonpy_greet.so.1"
    subprocess.run(
        [cc, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(lib / soname), "greet.c"],
        cwd=build,
        check=True,
    )
    (lib / "libtritonpy_greet.so").symlink_to(soname)
    site_packages = next(lib.glob("python3*/site-packages"))
    ext = site_packages / f"greet_ext{sysconfig.get_config_var('EXT_SUFFIX')}"
    include = sysconfig.get_paths()["include"]
    link = [f"-L{lib}", "-ltritonpy_greet"]
    subprocess.run(
        [cc, "-shared", "-fPIC", f"-I{include}", "-o", str(ext), "greet_ext.c", *link],
        cwd=build,
        check=True,
    )
    return dest


def numpy_only(dest: Path) -> Path:
    """A directory through which only numpy (of this installation) is seen."""
    dest.mkdir()
    for name in ("numpy", "numpy.libs"):
        if (SITE / name).exists():
            (dest / name).symlink_to(SITE / name)
    return dest


def pack(src: Path | None, archive: Path, members: list[Member] | tuple[()] = ()) -> Path:
    """A tar.gz of the tree `src` (its entries at the top), then `members`;
    a regular file member holds b"pwned"."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for entry in sorted(src.iterdir()) if src else []:
            tar.add(entry, arcname=entry.name)
        for name, kind, link in members:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mode = kind, link, 0o644
            data = b"pwned" if kind == REG else b""
            info.size = len(data)
            if kind == tarfile.CHRTYPE:
                info.devmajor, info.devminor = 1, 3  # what /dev/null is
            tar.addfile(info, io.BytesIO(data))
    return archive


def write_model(
    repo: Path,
    name: str,
    env_path: str,
    files: dict[str, Path] | None = None,
    source: Path = ENV_INFO,
) -> Path:
    """The env_info model (or `source`) as `name`, with EXECUTION_ENV_PATH
    `env_path` and `files` copied into its directory."""
    model = repo / name
    shutil.copytree(source, model)
    config = (source / "config.pbtxt").read_text().replace(f'"{source.name}"', f'"{name}"')
    param = f'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{env_path}" }} }}'
    (model / "config.pbtxt").write_text(config + param + "\n")
    for dest, src in (files or {}).items():
        shutil.copy(src, model / dest)
    return model


def env_server(repo: Path, work: Path, cache: Path, *args: str, **kwargs: Any) -> TritonServer:
    """A server over ``repo`` that loads models when asked (the tests
    watch each environment's load) and unpacks environments into
    ``cache``; ``args``: more tritonserver arguments."""
    explicit = ["--model-control-mode=explicit", f"--backend-config=tritonpy,env-cache-dir={cache}"]
    return TritonServer(repo, work, args=[*explicit, *args], **kwargs)
