# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The structure of backend/src, read from its text as a structure tool
reads it.

The #include graph, from the ``#include "..."`` lines (as
tests/unit/test_import_graph.py reads the Python side's imports): no header
includes itself through others, no two modules include each other, and
the rooms (the folders of backend/src) depend on each other one way.

A module is a header and the .cc of the same name beside it: what either
includes, the module includes. A header of no module's own (no .cc beside
it) that only .cc files include is part of those files' code, not a module:
its includes count as theirs. Every include line counts, also one under
``#if``: a reader of the source sees it as an arrow all the same.

Frames are put together only in the protocol room (the files whose path
under backend/src starts with ``protocol``): every other file sends what
one of its builders (protocol_frames.h) returns."""

from __future__ import annotations

import graphlib
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "backend" / "src"
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.MULTILINE)


def sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*") if p.suffix in (".h", ".cc"))


def includes_of(path: Path) -> set[Path]:
    """The files of backend/src that ``path`` includes: each name is looked
    up beside ``path``, then from backend/src (the include path)."""
    found = set()
    for name in _INCLUDE.findall(path.read_text()):
        for base in (path.parent, SRC):
            target = (base / name).resolve()
            if target.is_file() and SRC in target.parents:
                found.add(target)
                break
    return found


def file_graph() -> dict[Path, set[Path]]:
    return {p.resolve(): includes_of(p) for p in sources()}


def module_graph() -> dict[str, set[str]]:
    files = file_graph()
    headers = {p for p in files if p.suffix == ".h"}
    included_by_header = {d for p in headers for d in files[p]}
    # Headers private to the .cc files that include them (see above).
    private = {
        h for h in headers if h not in included_by_header and not h.with_suffix(".cc").is_file()
    }

    def name(p: Path) -> str:
        return str(p.relative_to(SRC).with_suffix(""))

    def reach(p: Path, seen: set[Path]) -> set[Path]:
        out = set()
        for d in files[p]:
            if d in private and d not in seen:
                seen.add(d)
                out |= reach(d, seen)
            elif d not in private:
                out.add(d)
        return out

    graph: dict[str, set[str]] = {}
    for p in files:
        if p in private:
            continue
        deps = {name(d) for d in reach(p, set())}
        graph.setdefault(name(p), set()).update(deps - {name(p)})
    return graph


def _assert_acyclic(graph: dict, what: str) -> None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        cycle = " -> ".join(str(n) for n in e.args[1])
        pytest.fail(f"{what} in backend/src: {cycle}")


def room_graph() -> dict[str, set[str]]:
    """The rooms, each a folder of backend/src, and the rooms their files
    include. A file on top (the entry points) is in no room: it builds
    from all of them."""

    def room(p: Path) -> str | None:
        parts = p.relative_to(SRC).parts
        return parts[0] if len(parts) > 1 else None

    graph: dict[str, set[str]] = {}
    for p, deps in file_graph().items():
        if room(p) is None:
            continue
        arrows = graph.setdefault(room(p), set())
        arrows |= {room(d) for d in deps if room(d) not in (None, room(p))}
    return graph


def test_the_reader_finds_the_arrows_it_should() -> None:
    """The reader itself: arrows known to be there."""
    files = file_graph()
    assert len(files) > 50
    by_name = {p.name: deps for p, deps in files.items()}
    assert any(d.name == "thread_annotations.h" for d in by_name["mutex.h"])
    modules = module_graph()
    stub_process = next(m for m in modules if m.endswith("stub_process"))
    # stub_process.cc includes stub_template.h: a module arrow from a .cc.
    assert any(m.endswith("stub_template") for m in modules[stub_process])


def test_no_header_includes_itself() -> None:
    _assert_acyclic(file_graph(), "include cycle")


def test_no_two_modules_include_each_other() -> None:
    """As child_launch.h and stub_process.cc once did: the settings both
    need (StubLaunch) now sit in a leaf header of their own."""
    _assert_acyclic(module_graph(), "module cycle")


def test_the_rooms_depend_on_each_other_one_way() -> None:
    """util below protocol, ipc, triton, process, model, then bls and
    instance (docs/architecture.md): no room includes a room that includes
    it."""
    _assert_acyclic(room_graph(), "room cycle")


def test_a_cycle_is_seen() -> None:
    """The check fails on a cycle: two modules made to include each other."""
    graph = module_graph()
    a, b = sorted(graph)[:2]
    graph[a] = graph[a] | {b}
    graph[b] = graph[b] | {a}
    with pytest.raises(pytest.fail.Exception):
        _assert_acyclic(graph, "module cycle")


# The codec's frame assembly: what only the protocol room calls.
_ASSEMBLY = re.compile(
    r"\b(MakeFrame|BeginFrame|FinishFrame|EncodeBodyRefFrame|Encode[A-Z]\w*)\s*\("
)


def in_protocol_room(path: Path) -> bool:
    return str(path.relative_to(SRC)).startswith("protocol")


def test_frames_are_built_only_in_the_protocol_room() -> None:
    outside = {
        f"{p.relative_to(SRC)}: {m.group(1)}"
        for p in sources()
        if not in_protocol_room(p)
        for m in _ASSEMBLY.finditer(p.read_text())
    }
    assert not outside, sorted(outside)
    # The room itself is found, and assembles frames.
    room = [p for p in sources() if in_protocol_room(p)]
    assert any(_ASSEMBLY.search(p.read_text()) for p in room)
