# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The checkout's folders are what is imported (tritonpy/ is the package
root), and a process started in the checkout's top folder, where tritonpy/
comes first on sys.path, still runs the installed tritonpy's compiled parts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_in_checkout(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_package_root_is_the_tritonpy_folder() -> None:
    out = run_in_checkout("-c", "import tritonpy; print(tritonpy.__file__)")
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == ROOT / "tritonpy" / "__init__.py"


def test_checkout_finds_the_installed_stub_and_backend() -> None:
    """`python -m bench` and stubs of a tritonserver started here import the
    checkout's tritonpy/ first: the stub, the model API and the backend
    library come from the installation behind it."""
    out = run_in_checkout(
        "-c",
        "from tritonpy import install, pb_utils\n"
        "from tritonpy.stub import _batch, _codec\n"
        "print(install.library())",
    )
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_file()
    stub = run_in_checkout("-m", "tritonpy.stub", "--help")
    assert stub.returncode == 0 and "--fd" in stub.stdout, stub.stderr
