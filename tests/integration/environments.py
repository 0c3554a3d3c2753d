# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Building execution environments for the tests (no network): virtual
environments of this Python, tar.gz archives of them (with hand-made
members, for hostile archives), and copies of the env_info model pointing
EXECUTION_ENV_PATH at them."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import tritonpy

from server import MODELS

__all__ = [
    "ENV_INFO",
    "LNK",
    "REG",
    "SITE",
    "SYM",
    "Member",
    "make_venv",
    "numpy_only",
    "pack",
    "write_model",
]

SITE = Path(tritonpy.__file__).resolve().parents[1]  # site-packages holding tritonpy
ENV_INFO = MODELS / "env_info"

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
