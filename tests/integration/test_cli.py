# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The tritonpy command: help, backend-dir, install, serve."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from server import build_repository, free_ports

TRITONPY = [sys.executable, "-m", "tritonpy"]


@pytest.mark.parametrize("cmd", [[], ["serve"], ["backend-dir"], ["install"], ["server-path"]])
def test_help(cmd: list[str]) -> None:
    out = subprocess.run([*TRITONPY, *cmd, "--help"], capture_output=True, text=True, check=True)
    assert "usage: tritonpy" in out.stdout


def test_backend_dir_has_both_names(tmp_path: Path) -> None:
    out = subprocess.run(
        [*TRITONPY, "backend-dir", "--dir", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        check=True,
    )
    d = Path(out.stdout.strip())
    for name in ("tritonpy", "python"):
        lib = d / name / f"libtriton_{name}.so"
        assert lib.is_file()
        conf = (d / name / "tritonpy.conf").read_text()
        assert f"python-executable={sys.executable}" in conf


def test_install_into_existing_backends_dir(tmp_path: Path) -> None:
    other = tmp_path / "backends" / "onnxruntime"
    other.mkdir(parents=True)
    (other / "libtriton_onnxruntime.so").write_bytes(b"keep me")
    subprocess.run(
        [*TRITONPY, "install", str(tmp_path / "backends"), "--as", "python"],
        check=True,
        capture_output=True,
    )
    assert (tmp_path / "backends" / "python" / "libtriton_python.so").is_file()
    assert (other / "libtriton_onnxruntime.so").read_bytes() == b"keep me"


def test_serve_runs_a_repository(tmp_path: Path) -> None:
    repo = build_repository(tmp_path / "repo", ["add_sub"])
    http, grpc, metrics = free_ports(3)
    env = {**os.environ, "TRITONPY_BACKEND_DIR": str(tmp_path / "backends")}
    proc = subprocess.Popen(
        [
            *TRITONPY,
            "serve",
            str(repo),
            "--",
            f"--http-port={http}",
            f"--grpc-port={grpc}",
            f"--metrics-port={metrics}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        status = 0
        while time.monotonic() < deadline and status != 200:
            try:
                status = urllib.request.urlopen(
                    f"http://127.0.0.1:{http}/v2/health/ready", timeout=2
                ).status
            except OSError:
                time.sleep(0.2)
        assert status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        if proc.stdout:
            proc.stdout.close()
