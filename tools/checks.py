# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The static checks, one command each; tests/unit/test_checks.py, `make
format` and .pre-commit-config.yaml all call these.

    python tools/checks.py mypy            type-check the packages and examples
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
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Source directory -> the package it installs as (setup.py's package_dir).
PACKAGES = {
    "tritonpy": "tritonpy",
    "pb_utils": "tritonpy/pb_utils",
    "stub": "tritonpy/stub",
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


def source_tree(dest: Path) -> dict[str, str]:
    """Lay the sources out as installed (tritonpy/, tritonpy/pb_utils/, ...)
    with symlinks under ``dest``, and every example as its own module
    (they are all called model.py). Returns {tree path: source path}."""
    names: dict[str, str] = {}
    for src, pkg in PACKAGES.items():
        for f in sorted((ROOT / src).iterdir()):
            if f.suffix in (".py", ".pyi") or f.name == "py.typed":
                link = dest / pkg / f.name
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(f)
                names[str(link)] = str(f.relative_to(ROOT))
    for f in sorted((ROOT / "examples").rglob("*.py")):
        if f.is_symlink():
            continue  # examples/model_repository links to the examples
        rel = f.relative_to(ROOT)
        link = dest / "examples" / ("_".join(rel.with_suffix("").parts[1:]) + ".py")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(f)
        names[str(link)] = str(rel)
    (dest / "examples" / "__init__.py").write_text("")
    return names


def run_mypy(extra: list[str] | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="tritonpy-mypy-") as tmp:
        tree = Path(tmp)
        names = source_tree(tree)
        examples = sorted(str(p) for p in (tree / "examples").glob("*.py"))
        cmd = [
            tool("mypy"),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
            "tritonpy",
            "triton_python_backend_utils",
            *examples,
            *(extra or []),
        ]
        env = dict(os.environ, MYPYPATH=str(tree))
        out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        text = out.stdout + out.stderr
        for link, src in sorted(names.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(link, src).replace(os.path.relpath(link, tree), src)
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
