# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Every folder under src/ is named as it is imported, and a process started
at the top of a checkout imports the installed tritonpy (with its compiled
parts), never the uncompiled source beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def run_in_checkout(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def source_packages() -> list[str]:
    """Dotted names of the folders under src/ that hold Python modules."""
    names = []
    for folder in sorted(p for p in SRC.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        if any(f.suffix in (".py", ".pyx") for f in folder.iterdir()):
            names.append(".".join(folder.relative_to(SRC).parts))
    return names


def test_every_source_folder_is_a_package_of_its_import_name() -> None:
    packages = source_packages()
    assert "tritonpy.stub" in packages and "triton_python_backend_utils" in packages
    for name in packages:
        assert (SRC / name.replace(".", "/") / "__init__.py").is_file(), name
    out = run_in_checkout(
        "-c",
        "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n",
        *packages,
    )
    assert out.returncode == 0, out.stderr


def test_no_python_source_outside_src() -> None:
    """The package is all under src/: a module left at the top would be
    imported from a checkout instead of the installed one."""
    top = {p.name for p in ROOT.iterdir() if p.is_dir()}
    assert not top & {"tritonpy", "stub", "pb_utils", "batching", "compat"}, top


def test_checkout_imports_the_installed_package() -> None:
    out = run_in_checkout(
        "-c",
        "import tritonpy\n"
        "from tritonpy import install\n"
        "from tritonpy.stub import _batch, _codec\n"
        "print(tritonpy.__file__)\n"
        "print(install.library())",
    )
    assert out.returncode == 0, out.stderr
    package, library = out.stdout.split()
    assert not Path(package).resolve().is_relative_to(SRC), package
    assert Path(library).is_file()
    stub = run_in_checkout("-m", "tritonpy.stub", "--help")
    assert stub.returncode == 0 and "--fd" in stub.stdout, stub.stderr
