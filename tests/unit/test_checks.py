# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Static checks run as tests, so `make test` fails on them like on any bug.

The commands live in tools/checks.py (also used by `make format` and
.pre-commit-config.yaml); the rules in pyproject.toml, .clang-format and
.codespellrc.
"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKS = [sys.executable, str(ROOT / "tools" / "checks.py")]


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found is not None, f"{name} is installed by `make setup`"
    return found


def run(cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_ruff() -> None:
    out = run([tool("ruff"), "check", "--no-cache", str(ROOT)], timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format() -> None:
    out = run([tool("ruff"), "format", "--check", "--no-cache", str(ROOT)], timeout=120)
    assert out.returncode == 0, "run `make format`:\n" + out.stdout + out.stderr


def test_mypy() -> None:
    # What a bench run leaves in bench/work (models of its own, typed or
    # not) is not the project's code: a wrongly typed one there changes
    # nothing.
    left = ROOT / "bench" / "work" / f"mypy-probe-{os.getpid()}"
    left.mkdir(parents=True)
    try:
        (left / "model.py").write_text('count: int = "not a number"\n')
        out = run([*CHECKS, "mypy"])
    finally:
        shutil.rmtree(left)
    assert out.returncode == 0, out.stdout + out.stderr


def test_clang_format() -> None:
    out = run([*CHECKS, "clang-format"])
    assert out.returncode == 0, "run `make format`:\n" + (out.stdout + out.stderr)[-6000:]


def test_codespell() -> None:
    out = run([*CHECKS, "codespell"])
    assert out.returncode == 0, out.stdout + out.stderr


def test_codec_stub_declares_only_real_names() -> None:
    """stub/_codec.pyi names nothing the compiled module lacks (it may lag
    behind new constants: its __getattr__ covers those)."""
    codec = importlib.import_module("tritonpy.stub._codec")
    declared = []
    for line in (ROOT / "src" / "tritonpy" / "stub" / "_codec.pyi").read_text().splitlines():
        word = line.split(":")[0].split("(")[0].split()
        if line[:1].isalpha() and word:
            name = word[-1]
            if not line.startswith(("from ", "import ")) and name != "__getattr__":
                declared.append(name)
    assert len(declared) > 40
    missing = [n for n in declared if not hasattr(codec, n)]
    assert not missing, missing
    tree = ast.parse((ROOT / "src" / "tritonpy" / "stub" / "_codec.pyi").read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):  # its methods, properties and fields
            cls = getattr(codec, node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    assert hasattr(cls, item.name), (node.name, item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    assert hasattr(cls, item.target.id), (node.name, item.target.id)


def test_pre_commit_runs_the_same_checks() -> None:
    import yaml

    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    entries = {h["entry"] for repo in config["repos"] for h in repo["hooks"]}
    assert entries == {
        ".venv/bin/ruff check --force-exclude",
        ".venv/bin/ruff format --check --force-exclude",
        ".venv/bin/python tools/checks.py mypy",
        ".venv/bin/python tools/checks.py clang-format",
        ".venv/bin/python tools/checks.py codespell",
    }
