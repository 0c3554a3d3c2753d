# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What building a small object costs, three ways.

    python -m bench.object_cost

The stub builds a handful of objects per request (tensors, the request, the
response). This times building one object of five fields, as the stub
does for each input tensor (stub/_batch.pyx), with one builder function
run three ways: by the interpreter on a ``__slots__`` class; compiled by
Cython on that same Python class (what compiling the stub's modules as
they are would give); compiled by Cython on an extension type with C
fields (what typing the objects would give). Compiles a small Cython
module in a temporary directory (Cython and a C compiler, as ``make
setup`` needs).
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import timeit
from pathlib import Path
from typing import Any

# One builder, run by the interpreter and compiled by Cython; the typed
# variant differs only in its first line.
BUILD = """
def build(cls, name, dtype, dims, data):
    self = cls.__new__(cls)
    self.name = name
    self.dtype = dtype
    self.dims = dims
    self.buf = data
    self.array = None
    return self
"""

SOURCE = (
    """
# cython: language_level=3

cdef class Typed:
    cdef public object name, dtype, dims, array, buf
"""
    + BUILD
    + BUILD.replace("def build(cls,", "def build_typed(").replace(
        "self = cls.__new__(cls)", "cdef Typed self = Typed.__new__(Typed)"
    )
)


class Slots:
    __slots__ = ("name", "dtype", "dims", "array", "buf")


def interpreted() -> Any:
    namespace: dict[str, Any] = {}
    exec(BUILD, namespace)
    return namespace["build"]


def compile_module(work: Path) -> object:
    import pyximport

    (work / "tp_object_cost.pyx").write_text(SOURCE)
    sys.path.insert(0, str(work))
    pyximport.install(build_dir=str(work / "build"), language_level=3)
    return importlib.import_module("tp_object_cost")


def nanoseconds(fn: object, n: int = 500_000) -> float:
    best = min(timeit.repeat(fn, number=n, repeat=5))  # type: ignore[arg-type]
    return best / n * 1e9


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tritonpy-object-cost-") as tmp:
        m = compile_module(Path(tmp))
        build = interpreted()
        dims, data = (4,), b"\0" * 16
        rows = [
            ("Python, __slots__ class", lambda: build(Slots, "IN", 11, dims, data)),
            ("Cython, same Python class", lambda: m.build(Slots, "IN", 11, dims, data)),  # type: ignore[attr-defined]
            ("Cython, extension type", lambda: m.build_typed("IN", 11, dims, data)),  # type: ignore[attr-defined]
        ]
        empty = nanoseconds(lambda: None)
        for label, fn in rows:
            print(f"{label:28s} {nanoseconds(fn) - empty:6.0f} ns per object")
    return 0


if __name__ == "__main__":
    sys.exit(main())
