# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The backend's C++ unit tests (backend/tests/unit_test.cc: JSON, the
arena allocator, peer arena bounds, codec round trips, the socket end's
receive), built by ``pip install .`` as tritonpy_unit_test and run here."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cpp_unit_tests_pass() -> None:
    binary = ROOT / "build" / "cmake" / "tritonpy_unit_test"
    assert binary.is_file(), f"{binary} was not built (pip install .)"
    out = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "ok: 0 failure(s)" in out.stdout, out.stdout + out.stderr
