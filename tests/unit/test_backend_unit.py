# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The backend's C++ unit tests, built by ``pip install .`` and run here:
tritonpy_unit_test (backend/tests/unit_test.cc: JSON, the arena allocator,
peer arena bounds, codec round trips, the socket end's receive),
tritonpy_worker_test (backend/tests/worker_test.cc: the backend's worker
threads and the descriptor pairs of the children it starts),
tritonpy_bls_test (backend/tests/bls_test.cc, with ASan and UBSan: the BLS
bookkeeping under Triton's callbacks played from several threads),
tritonpy_readiness_test (backend/tests/readiness_test.cc, with ASan and
UBSan: the instance readiness answer's texts) and
tritonpy_metrics_test (backend/tests/metrics_test.cc, the same way: every
custom metric handle counts against the caps)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(name: str) -> None:
    binary = ROOT / "build" / "cmake" / name
    assert binary.is_file(), f"{binary} was not built (pip install .)"
    out = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok: 0 failure(s)" in out.stdout, out.stdout + out.stderr


def test_cpp_unit_tests_pass() -> None:
    run("tritonpy_unit_test")


def test_cpp_worker_tests_pass() -> None:
    """Among them: a wake-up sent before the worker waits is not lost, and a
    child that cannot start leaves no descriptor of its pairs open."""
    run("tritonpy_worker_test")


def test_cpp_bls_tests_pass_under_asan() -> None:
    """Among them: a BLS call's final response and its request release on two
    threads free the call once, never while the other callback uses it."""
    run("tritonpy_bls_test")


def test_cpp_readiness_tests_pass_under_asan() -> None:
    """Among them: an instance with no stub answers a readiness query with
    the official text first ("Stub process '<instance>' is not healthy.")."""
    run("tritonpy_readiness_test")


def test_cpp_metrics_tests_pass_under_asan() -> None:
    """A stub that makes handle after handle of one family or series meets
    metric-max-families / metric-max-series like one that makes new ones."""
    run("tritonpy_metrics_test")
