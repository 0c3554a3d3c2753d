# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The static checks, one command each; tests/unit/test_checks.py, `make
format` and .pre-commit-config.yaml all call these.

    python tools/checks.py mypy            type-check the packages and examples (after
                                           make setup: it checks this tree's modules
                                           under the installed package's names)
    python tools/checks.py clang-format    check backend/ and bench/*.cc against .clang-format
    python tools/checks.py clang-format --fix
    python tools/checks.py codespell       spelling of docs, README and comments

Each prints what it found and exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Source folder -> the package it installs as (setup.py's package_dir); the
# package root, tritonpy/, is the folder of its name.
PACKAGES = {
    "stub": "tritonpy/stub",
    "pb_utils": "tritonpy/pb_utils",
    "batching": "tritonpy/batching",
    "compat/triton_python_backend_utils": "triton_python_backend_utils",
}
CODESPELL_PATHS = [
    "README.md",
    "docs",
    "pb_utils",
    "stub",
    "batching",
    "tritonpy",
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


def installed_counterparts() -> tuple[dict[str, str], list[str]]:
    """{installed file: source file} for the modules of PACKAGES, and what
    keeps the installation from being this tree's (a module installed but
    not in the tree, or the reverse)."""
    spec = importlib.util.find_spec("tritonpy.stub")
    if spec is None or spec.origin is None:
        sys.exit("checks: tritonpy is not installed (make setup installs it)")
    site = Path(spec.origin).resolve().parents[2]
    pairs: dict[str, str] = {}
    differences = []
    for src, pkg in PACKAGES.items():
        sources = {f.name for f in (ROOT / src).iterdir() if f.suffix in (".py", ".pyi")}
        installed = {f.name for f in (site / pkg).iterdir() if f.suffix in (".py", ".pyi")}
        differences += [f"{src}/{name}: not installed" for name in sorted(sources - installed)]
        differences += [f"{pkg}/{name}: not in {src}/" for name in sorted(installed - sources)]
        pairs.update({str(site / pkg / name): f"{src}/{name}" for name in sources & installed})
    return pairs, differences


def run_mypy(extra: list[str] | None = None) -> int:
    """Checks the packages under their import names and the examples (as
    examples.<folder>.<file>). mypy cannot map tritonpy.stub to stub/: it
    finds tritonpy.stub in the installation, and --shadow-file has it read
    each module from this tree instead; errors name the tree's files."""
    pairs, differences = installed_counterparts()
    if differences:
        print("checks: tritonpy is not installed from this tree (run make setup):")
        print("\n".join(differences))
        return 1
    shadows = [arg for installed, src in pairs.items() for arg in ("--shadow-file", installed, src)]
    packages = ["tritonpy", *(pkg.replace("/", ".") for pkg in PACKAGES.values()), "examples"]
    cmd = [
        tool("mypy"),
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(ROOT / ".mypy_cache"),
        "--no-error-summary",
        "--exclude",
        "^examples/model_repository/",  # links to the examples
        *shadows,
        *(arg for pkg in packages for arg in ("-p", pkg)),
        *(extra or []),
    ]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    text = out.stdout + out.stderr
    for installed, src in sorted(pairs.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(installed, src).replace(os.path.relpath(installed, ROOT), src)
    print(text, end="")
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
