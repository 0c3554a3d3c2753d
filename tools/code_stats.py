# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Size figures of the source tree, for reviews of its structure.

    python tools/code_stats.py [checkout]

Counts the tracked .py/.pyx/.pxi/.pxd/.cc/.h files under the source folders
and prints their number and lines, the largest files, and the largest
classes: a Python class by its body, a Cython class by its indented block,
a C++ class by its declaration plus its out-of-line member definitions
(``Name::member(`` at the start of a line, to the closing brace). Rough by
design: it reads text, it does not parse C++.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

SOURCE_DIRS = ("backend/src/", "src/")
SUFFIXES = (".py", ".pyx", ".pxi", ".pxd", ".cc", ".h")
_CXX_MEMBER = re.compile(r"^(?:[\w:<>*&, ]+\s)?[*&]?(\w+)::~?\w+\(")
_CXX_CLASS = re.compile(r"^(?:class|struct) (\w+)[^;]*$")
_PYX_CLASS = re.compile(r"^(?:cdef )?class (\w+)")


def source_files(root: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    return [f for f in listed if f.startswith(SOURCE_DIRS) and f.endswith(SUFFIXES)]


def python_classes(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    return [
        ((n.end_lineno or n.lineno) - n.lineno + 1, n.name)
        for n in ast.walk(tree)
        if isinstance(n, ast.ClassDef)
    ]


def cython_classes(lines: list[str]) -> list[tuple[int, str]]:
    found = []
    for i, line in enumerate(lines):
        m = _PYX_CLASS.match(line)
        if m:
            j = i + 1
            while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
                j += 1
            found.append((j - i, m.group(1)))
    return found


def cxx_classes(lines: list[str], sizes: dict[str, int]) -> None:
    i = 0
    while i < len(lines):
        line = lines[i]
        member = _CXX_MEMBER.match(line)
        if member and not line.startswith((" ", "}", "//")) and "=" not in line.split("(")[0]:
            j = i
            while j < len(lines) and lines[j] != "}":
                j += 1
            sizes[member.group(1)] = sizes.get(member.group(1), 0) + j - i + 1
            i = j
        decl = _CXX_CLASS.match(lines[i]) if i < len(lines) else None
        if decl:
            j = i
            while j < len(lines) and not lines[j].startswith("};"):
                j += 1
            sizes[decl.group(1)] = sizes.get(decl.group(1), 0) + j - i + 1
            i = j
        i += 1


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = source_files(root)
    lines = {f: (root / f).read_text(errors="replace").split("\n") for f in files}
    counts = {f: len(text) - (text[-1] == "") for f, text in lines.items()}
    classes: list[tuple[int, str]] = []
    cxx: dict[str, int] = {}
    for f, text in lines.items():
        if f.endswith(".py"):
            classes += [(n, f"{f}:{name}") for n, name in python_classes(root / f)]
        elif f.endswith((".pyx", ".pxi")):
            classes += [(n, f"{f}:{name}") for n, name in cython_classes(text)]
        elif f.endswith((".cc", ".h")):
            cxx_classes(text, cxx)
    classes += [(n, f"C++ {name}") for name, n in cxx.items()]
    classes.sort(reverse=True)
    largest = sorted(counts.items(), key=lambda kv: -kv[1])
    print(f"source files: {len(files)}, lines: {sum(counts.values())}")
    print("largest files:", ", ".join(f"{f} {n}" for f, n in largest[:5]))
    print("files over 800 lines:", [f for f, n in largest if n > 800])
    print("largest classes:", ", ".join(f"{name} {n}" for n, name in classes[:6]))
    print("classes over 500 lines:", [name for n, name in classes if n > 500])


if __name__ == "__main__":
    main()
