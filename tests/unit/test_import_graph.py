# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The import graph of src/, read from the ``import`` and ``cimport``
lines as text (as a structure tool reads them): the stub's modules import
each other without a cycle, the arrows between the stub and pb_utils point
one way, stub -> pb_utils (pb_utils runs without a stub:
docs/architecture.md), and the stub's request path is one compiled room
whose modules declare their interface in a .pxd and reach each other by
cimport.

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
# The same two forms, cimport only (a .pyx or .pxd reaching a .pxd).
_FROM_C = re.compile(
    r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+cimport[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE
)
_CIMPORT = re.compile(r"^[ \t]*cimport[ \t]+([^\n]*)", re.MULTILINE)
# The stub's request path: the channel hands every frame to _engine, and an
# EXECUTE goes from there to its RESPONSES frame in these compiled modules
# (and the model's own code). _wire is the generated .pxd of the layout.
REQUEST_PATH = ("tritonpy.stub._engine", "tritonpy.stub._batch", "tritonpy.stub._codec")
DECLARATIONS = ("tritonpy.stub._wire",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _strip(names: str) -> list[str]:
    """The names of an import list, without ``as`` aliases and comments."""
    names = re.sub(r"#[^\n]*", "", names).strip("()")
    return [n.split()[0] for n in names.replace("\n", " ").split(",") if n.strip()]


def imports_of(path: Path, modules: set[str], cimports_only: bool = False) -> set[str]:
    """The modules of src/ that the file at ``path`` names in an import
    line (a cimport line only, with ``cimports_only``)."""
    text = path.read_text()
    name = module_name(path)
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found = set()
    from_form, import_form = (_FROM_C, _CIMPORT) if cimports_only else (_FROM, _IMPORT)
    for m in from_form.finditer(text):
        source = m.group(1)
        if source.startswith("."):
            dots = len(source) - len(source.lstrip("."))
            base = package.rsplit(".", dots - 1)[0] if dots > 1 else package
            rest = source[dots:]
            source = f"{base}.{rest}" if rest else base
        for imported in _strip(m.group(2)):
            # ``from pkg import mod`` names the module pkg.mod.
            found.add(f"{source}.{imported}" if f"{source}.{imported}" in modules else source)
    for m in import_form.finditer(text):
        found.update(_strip(m.group(1)))
    return {f for f in found if f in modules and f != name}


def import_graph(cimports_only: bool = False) -> dict[str, set[str]]:
    files = [p for p in SRC.rglob("*") if p.suffix in SUFFIXES and "__pycache__" not in p.parts]
    modules = {module_name(p) for p in files}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path in files:
        graph[module_name(path)] |= imports_of(path, modules, cimports_only)
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
    cgraph = import_graph(cimports_only=True)
    assert "tritonpy.stub._batch" in cgraph["tritonpy.stub._engine"]  # from X cimport (...)
    assert "tritonpy.pb_utils._core" in cgraph["tritonpy.pb_utils._seam"]  # in a .pxd
    assert "tritonpy.stub._codec" not in cgraph["tritonpy.stub.runtime"]  # an import only


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


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for d in graph[todo.pop()] - seen:
            seen.add(d)
            todo.append(d)
    return seen


def test_the_request_path_is_one_compiled_room_with_a_declared_interface() -> None:
    """Each module of the request path is compiled and declares what the
    others call in a .pxd; they reach each other by cimport from the
    channel's receiver (_engine), and name no Python module of the stub:
    no request crosses into the stub's Python code but for a frame it
    hands to its handler, which is the life cycle's."""
    stub = SRC / "tritonpy" / "stub"
    for module in REQUEST_PATH:
        stem = module.rpartition(".")[2]
        assert (stub / f"{stem}.pyx").is_file() and (stub / f"{stem}.pxd").is_file(), module
    cgraph = _within(import_graph(cimports_only=True), "tritonpy.stub.")
    assert set(REQUEST_PATH) <= _reach(cgraph, REQUEST_PATH[0])
    graph = import_graph()
    for module in REQUEST_PATH:
        outside = {
            d
            for d in graph[module]
            if d.startswith("tritonpy.stub.") and d not in REQUEST_PATH + DECLARATIONS
        }
        assert not outside, f"{module} imports the stub's Python modules {sorted(outside)}"
    _assert_acyclic(_within(graph, "tritonpy.stub._"), "the request path")
