# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The import graph of src/, read from the ``import`` lines as text (as a
structure tool reads them): the stub's modules import each other without
a cycle, and the arrows between the stub and pb_utils point one way,
stub -> pb_utils (pb_utils runs without a stub: docs/architecture.md).

Every import line counts, also one under ``if TYPE_CHECKING:`` or in a
function: a reader of the source sees it as an arrow all the same."""

from __future__ import annotations

import graphlib
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
SUFFIXES = (".py", ".pyx", ".pxd", ".pxi", ".pyi")
# ``from X import a, b`` / ``from X cimport (a, b)`` / ``import X, Y`` /
# ``cimport X``, at any indent; a parenthesized list may span lines.
_FROM = re.compile(
    r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+c?import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE
)
_IMPORT = re.compile(r"^[ \t]*c?import[ \t]+([^\n]*)", re.MULTILINE)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _strip(names: str) -> list[str]:
    """The names of an import list, without ``as`` aliases and comments."""
    names = re.sub(r"#[^\n]*", "", names).strip("()")
    return [n.split()[0] for n in names.replace("\n", " ").split(",") if n.strip()]


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The modules of src/ that the file at ``path`` names in an import line."""
    text = path.read_text()
    name = module_name(path)
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found = set()
    for m in _FROM.finditer(text):
        source = m.group(1)
        if source.startswith("."):
            dots = len(source) - len(source.lstrip("."))
            base = package.rsplit(".", dots - 1)[0] if dots > 1 else package
            rest = source[dots:]
            source = f"{base}.{rest}" if rest else base
        for imported in _strip(m.group(2)):
            # ``from pkg import mod`` names the module pkg.mod.
            found.add(f"{source}.{imported}" if f"{source}.{imported}" in modules else source)
    for m in _IMPORT.finditer(text):
        found.update(_strip(m.group(1)))
    return {f for f in found if f in modules and f != name}


def import_graph() -> dict[str, set[str]]:
    files = [p for p in SRC.rglob("*") if p.suffix in SUFFIXES and "__pycache__" not in p.parts]
    modules = {module_name(p) for p in files}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path in files:
        graph[module_name(path)] |= imports_of(path, modules)
    return graph


def _within(graph: dict[str, set[str]], prefix: str) -> dict[str, set[str]]:
    return {
        m: {d for d in deps if d.startswith(prefix)}
        for m, deps in graph.items()
        if m.startswith(prefix)
    }


def test_the_reader_finds_the_arrows_it_should() -> None:
    """The parser itself: arrows known to be there, in each form."""
    graph = import_graph()
    assert "tritonpy.stub._codec" in graph["tritonpy.stub.runtime"]  # from pkg import mod as C
    assert "tritonpy.pb_utils._seam" in graph["tritonpy.stub._batch"]  # cimport (...)
    assert "tritonpy.pb_utils._bls" in graph["tritonpy.pb_utils._request"]  # from . import
    assert "tritonpy.pb_utils._errors" in graph["tritonpy.pb_utils._host"]  # from ._errors
    assert "tritonpy.stub.runtime" in graph["tritonpy.stub.main"]  # inside a function


def _assert_acyclic(graph: dict[str, set[str]], where: str) -> None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle in {where}: {' -> '.join(e.args[1])}")


def test_the_stub_modules_import_each_other_without_a_cycle() -> None:
    stub = _within(import_graph(), "tritonpy.stub.")
    assert len(stub) > 10
    _assert_acyclic(stub, "stub/")


def test_no_import_cycle_anywhere_in_src() -> None:
    _assert_acyclic(import_graph(), "src/")


def test_pb_utils_never_imports_the_stub() -> None:
    graph = import_graph()
    back = {
        (m, d)
        for m, deps in graph.items()
        if m.startswith("tritonpy.pb_utils")
        for d in deps
        if d.startswith("tritonpy.stub")
    }
    assert not back
    assert any(d.startswith("tritonpy.pb_utils") for d in graph["tritonpy.stub.runtime"])


def test_no_two_modules_share_a_name() -> None:
    """A module's name says what it is wherever it is read: no two modules
    of src/ share one (outside the package files ``__init__`` and
    ``__main__``), so the stub's frame codec (stub/_codec.pyx) is not
    confused with pb_utils' BYTES helpers (pb_utils/_bytes_tensor.py)."""
    where: dict[str, list[str]] = {}
    for p in SRC.rglob("*"):
        package_file = p.stem in ("__init__", "__main__")
        if p.suffix in (".py", ".pyx") and "__pycache__" not in p.parts and not package_file:
            where.setdefault(p.stem, []).append(module_name(p))
    shared = {stem: names for stem, names in where.items() if len(names) > 1}
    assert not shared, shared
