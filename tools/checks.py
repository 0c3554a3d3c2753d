# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The static checks, one command each; tests/unit/test_checks.py, `make
format` and .pre-commit-config.yaml all call these.

    python tools/checks.py mypy            type-check src/, the examples and bench/
    python tools/checks.py clang-format    check backend/ and bench/*.cc against .clang-format
    python tools/checks.py clang-format --fix
    python tools/checks.py codespell       spelling of docs, README and comments

Each prints what it found and exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CODESPELL_PATHS = [
    "README.md",
    "docs",
    "src",
    "backend",
    "examples",
    "tests",
    "tools",
    "bench",
    "deploy",
    ".devcontainer",
]


def tool(name: str) -> str:
    """A tool installed beside this interpreter (make setup), else on PATH."""
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        sys.exit(f"checks: {name} is not installed (make setup installs it)")
    return found


def run_mypy(extra: list[str] | None = None) -> int:
    """Checks the packages under src/ (the compiled modules by their .pyi),
    the examples (as examples.<folder>.<file>) and the bench (which finds
    the test harness it drives a stub with in tests/ and tests/stub/)."""
    cmd = [
        tool("mypy"),
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(ROOT / ".mypy_cache"),
        "--no-error-summary",
        # (On the command line, --exclude replaces pyproject.toml's list.)
        "--exclude",
        "^examples/model_repository/",  # links to the examples
        "--exclude",
        "^bench/(work|results)/",  # what a bench run leaves: models, servers' files
        *(arg for pkg in ("tritonpy", "triton_python_backend_utils") for arg in ("-p", pkg)),
        *(arg for pkg in ("examples", "bench") for arg in ("-p", pkg)),
        *(extra or []),
    ]
    search = [ROOT / "src", ROOT / "tests", ROOT / "tests" / "stub"]
    env = {**os.environ, "MYPYPATH": os.pathsep.join(str(p) for p in search)}
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    print(out.stdout + out.stderr, end="")
    return out.returncode


def backend_sources() -> list[str]:
    """The backend's C++ and the gRPC load generator's."""
    return sorted(
        [str(p) for p in (ROOT / "backend").rglob("*") if p.suffix in (".cc", ".h")]
        + [str(p) for p in (ROOT / "bench").glob("*.cc")]
    )


def run_clang_format(fix: bool) -> int:
    cmd = [tool("clang-format"), "--style=file"]
    cmd += ["-i"] if fix else ["--dry-run", "--Werror"]
    out = subprocess.run([*cmd, *backend_sources()], cwd=ROOT, capture_output=True, text=True)
    print(out.stdout + out.stderr, end="")
    return out.returncode


def run_codespell() -> int:
    paths = [p for p in CODESPELL_PATHS if (ROOT / p).exists()]
    out = subprocess.run(
        [tool("codespell"), "--config", str(ROOT / ".codespellrc"), *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    print(out.stdout + out.stderr, end="")
    return out.returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="checks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("check", choices=["mypy", "clang-format", "codespell"])
    p.add_argument("--fix", action="store_true", help="clang-format: rewrite the files")
    args = p.parse_args(argv)
    if args.check == "mypy":
        return run_mypy()
    if args.check == "clang-format":
        return run_clang_format(args.fix)
    return run_codespell()


if __name__ == "__main__":
    sys.exit(main())
