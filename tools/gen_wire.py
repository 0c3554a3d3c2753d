# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Writes the wire format's constants, read from docs/protocol.toml, into
the files that use them (`make wire`).

    python tools/gen_wire.py           rewrite whatever differs
    python tools/gen_wire.py --check   list what differs, exit 1 if anything

Whole files: backend/src/protocol/protocol_wire.h (the backend's constants, included
by protocol.h), src/tritonpy/stub/_wire.pxi (the stub codec's Python names,
included by _codec.pyx) and src/tritonpy/stub/_wire.pxd (the limits and
header offsets as C constants, cimported by the compiled stub modules). Regions between "BEGIN generated (<name>)" and "END generated
(<name>)" lines: the constants of src/tritonpy/stub/_codec.pyi and of
tests/protocol_ref.py, and the tables of docs/protocol.md.
The record layouts of the binary bodies give each record's field offsets,
size and smallest encoding as constants of the same files (Spec.layout),
and a table of docs/protocol.md; tests/spec_codec.py encodes and decodes
bodies from them, and tests/unit/test_wire_drift.py holds every codec to it.
tests/unit/test_wire_spec.py runs the check. The spec is read with the
standard library's tomllib (Python 3.11): a build needs none of this, only
the files it writes, which are committed.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]
SPEC = "docs/protocol.toml"
CPP_HEADER = "backend/src/protocol/protocol_wire.h"
PXI = "src/tritonpy/stub/_wire.pxi"
PXD = "src/tritonpy/stub/_wire.pxd"
# The files written whole; the others have generated regions (_REGIONS).
WHOLE_FILES = (CPP_HEADER, PXI, PXD)
PYI = "src/tritonpy/stub/_codec.pyi"
REF = "tests/protocol_ref.py"
DOC = "docs/protocol.md"
_BY = f"from {SPEC} by tools/gen_wire.py (make wire): do not edit"
NOTICE = f"generated {_BY}"
LICENSE = ("SPDX-License-Identifier: BSD-3-Clause", "Copyright (c) The tritonpy authors.")

# Wire integer types: (bytes, struct format, C++ type).
_INTS = {
    "u8": (1, "B", "uint8_t"),
    "u16": (2, "H", "uint16_t"),
    "u32": (4, "I", "uint32_t"),
    "u64": (8, "Q", "uint64_t"),
}


class SpecError(ValueError):
    """docs/protocol.toml breaks a rule the codecs rely on."""


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    offset: int
    doc: str


@dataclass(frozen=True)
class Code:
    """A named number of a group: a frame type, a flag, a location ..."""

    name: str
    value: int
    row: dict[str, Any]


# Record field types of a fixed width (bytes); "zero32" is a reserved u32.
WIDTHS = {"u8": 1, "u16": 2, "u32": 4, "u64": 8, "i64": 8, "f64": 8, "zero32": 4}
# A str's length and a list's count: one u32 before the bytes or items.
LENGTH_SIZE = 4
_SPECIAL = ("str", "list", "tensor_data", "union")


@dataclass(frozen=True)
class RecordField:
    name: str
    type: str  # a WIDTHS key, one of _SPECIAL or a record name
    of: str = ""  # list: the item type
    flat: bool = False  # a record or union whose fields sit in this record's
    tag: str = ""  # union: the earlier field whose value picks the case
    codes: str = ""  # union: the code group naming the tag's values
    cases: tuple[tuple[str, str], ...] = ()  # union: (code name, record)


@dataclass(frozen=True)
class Record:
    """The fields of a binary body, or of an entry or tensor in one."""

    name: str
    fields: tuple[RecordField, ...]
    frames: tuple[str, ...]
    positional: bool  # decoded as a list of its values, not by name


class Spec:
    """The validated contents of docs/protocol.toml."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.version: int = raw["protocol_version"]
        self.header: list[Field] = []
        offset = 0
        for row in raw["header"]:
            size = _INTS[row["type"]][0]
            if offset % size:
                raise SpecError(f"header field {row['field']} is not aligned")
            self.header.append(Field(row["field"], row["type"], offset, row["doc"]))
            offset += size
        self.header_size = offset
        if self.header_size % 8:
            raise SpecError("the header must keep the body 8-aligned (pad8)")
        self.magic: int = next(r["value"] for r in raw["header"] if r["field"] == "magic")
        self.limits: list[dict[str, Any]] = raw["limit"]
        self.frames = _codes(raw, "frame")
        if [c.value for c in self.frames] != list(range(1, len(self.frames) + 1)):
            # Decoders check a type by its range.
            raise SpecError("frame types must be 1, 2, ... without gaps")
        if len(self.frames) >= 32:
            raise SpecError("frame types past 31: widen kJsonFrameTypes (uint32_t) first")
        self.flags = _codes(raw, "flag", bits=True)
        self.response_flags = _codes(raw, "response_flag", bits=True)
        self.locations = _codes(raw, "location")
        self.metric_ops = _codes(raw, "metric_op")
        self.metric_kinds = _codes(raw, "metric_kind")
        self.log_levels = _codes(raw, "log_level")
        frame_names = {c.name for c in self.frames}
        for f in self.flags:
            if f.row["frames"] != "any" and f.row["frames"] not in frame_names:
                raise SpecError(f"flag {f.name}: unknown frame type {f.row['frames']}")
        for group in (self.metric_kinds, self.log_levels):
            if [c.value for c in group] != list(range(len(group))):
                raise SpecError(f"{group[0].name}...: values must be 0, 1, ... without gaps")
        self.names = {"protocol_version": self.version, "HEADER_SIZE": self.header_size}
        self.records = _records(raw, self)
        self.body_of: dict[str, Record] = {}
        for rec in self.records.values():
            for frame in rec.frames:
                if frame not in frame_names or frame in self.body_of:
                    raise SpecError(f"record {rec.name}: frame {frame} unknown or given twice")
                self.body_of[frame] = rec
        binary = {c.name for c in self.frames} - {c.name for c in self.json_frames}
        if set(self.body_of) != binary:
            raise SpecError(f"frames without a body record: {sorted(binary - set(self.body_of))}")
        layout = self.layout_names()
        for lim in self.limits:
            if lim["name"] in layout and layout[lim["name"]] != lim["value"]:
                raise SpecError(f"limit {lim['name']} differs from the record layout")

    def codes(self, group: str) -> list[Code]:
        return {
            "metric_op": self.metric_ops,
            "location": self.locations,
            "metric_kind": self.metric_kinds,
            "log_level": self.log_levels,
        }[group]

    def fixed_size(self, type_: str) -> int | None:
        """Bytes of a field of ``type_`` when it has a fixed width."""
        if type_ in WIDTHS:
            return WIDTHS[type_]
        if type_ in _SPECIAL:
            return None
        sizes = [self.fixed_size(f.type) for f in self.records[type_].fields]
        return None if None in sizes else sum(s for s in sizes if s is not None)

    def min_size(self, f: RecordField | str) -> int:
        """Bytes of the smallest encoding of a field (or of a record)."""
        if isinstance(f, str):
            return sum(self.min_size(g) for g in self.records[f].fields)
        if f.type in WIDTHS:
            return WIDTHS[f.type]
        if f.type in ("str", "list"):
            return LENGTH_SIZE
        if f.type == "tensor_data":
            return 0  # inline, nothing to pad, no bytes
        if f.type == "union":
            return min(self.min_size(rec) for _, rec in f.cases)
        return self.min_size(f.type)

    def layout(self, rec: Record) -> list[tuple[str, int]]:
        """(name, value) of the layout constants of ``rec``: the offset of
        each field at a fixed position, its smallest encoding (MIN_SIZE),
        its size when fixed (SIZE), and per union case the record's
        smallest encoding with that case (<CASE>_MIN_SIZE)."""
        out: list[tuple[str, int]] = []
        offset: int | None = 0
        for f in rec.fields:
            if offset is not None:
                out.append((f"{f.name.upper()}_OFFSET", offset))
                size = self.fixed_size(f.type)
                offset = None if size is None else offset + size
        if offset is not None:
            out.append(("SIZE", offset))
        out.append(("MIN_SIZE", self.min_size(rec.name)))
        for f in rec.fields:
            if f.type == "union":
                others = self.min_size(rec.name) - self.min_size(f)
                for code, case in f.cases:
                    out.append((f"{code}_MIN_SIZE", others + self.min_size(case)))
        return out

    def layout_names(self) -> dict[str, int]:
        """Every layout constant by its Python/Cython name (WIRE_ dropped):
        the type widths, then <RECORD>_<what> of each record."""
        out = {f"{t.upper()}_SIZE": n for t, n in WIDTHS.items() if t != "zero32"}
        out["LENGTH_SIZE"] = LENGTH_SIZE
        for rec in self.records.values():
            for what, value in self.layout(rec):
                name = f"{rec.name.upper()}_{what}"
                if name in out:
                    raise SpecError(f"record {rec.name}: the constant {name} is made twice")
                out[name] = value
        return out

    @property
    def json_frames(self) -> list[Code]:
        return [c for c in self.frames if c.row.get("json", False)]

    @property
    def response_known(self) -> int:
        return _or(self.response_flags)

    @property
    def log_levels_all(self) -> int:
        return (1 << len(self.log_levels)) - 1

    def doc(self, text: str) -> str:
        return text.format(**self.names)


def _codes(raw: dict[str, Any], group: str, bits: bool = False) -> list[Code]:
    out = [Code(row["name"], row["value"], row) for row in raw[group]]
    for seen in ({c.name for c in out}, {c.value for c in out}):
        if len(seen) != len(out):
            raise SpecError(f"{group}: a name or value is used twice")
    if bits and any(c.value <= 0 or c.value & (c.value - 1) for c in out):
        raise SpecError(f"{group}: every value must be a single bit")
    return out


def _records(raw: dict[str, Any], spec: Spec) -> dict[str, Record]:
    records = {}
    for name, row in raw["record"].items():
        fields = []
        for f in row["fields"]:
            cases = tuple((k, v) for k, v in f.get("cases", {}).items())
            fields.append(
                RecordField(
                    f["name"],
                    f["type"],
                    f.get("of", ""),
                    f.get("flat", False),
                    f.get("tag", ""),
                    f.get("codes", ""),
                    cases,
                )
            )
        records[name] = Record(
            name, tuple(fields), tuple(row.get("frames", ())), row.get("positional", False)
        )
    for rec in records.values():
        seen: list[str] = []
        for f in rec.fields:
            used = [f.of] if f.type == "list" else [f.type]
            used += [case for _, case in f.cases]
            for t in used:
                if t not in WIDTHS and t not in _SPECIAL and t not in records:
                    raise SpecError(f"record {rec.name}: field {f.name} has unknown type {t}")
            if f.type == "list" and f.of in _SPECIAL and f.of != "str":
                raise SpecError(f"record {rec.name}: a list of {f.of}")
            if f.type == "union":
                if f.tag not in seen:
                    raise SpecError(f"record {rec.name}: union {f.name} needs its tag first")
                names = {c.name for c in spec.codes(f.codes)}
                if {k for k, _ in f.cases} != names:
                    raise SpecError(f"record {rec.name}: union {f.name} must cover {f.codes}")
            seen.append(f.name)
    _acyclic(records)
    return records


def _acyclic(records: dict[str, Record]) -> None:
    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            raise SpecError(f"records contain themselves: {' > '.join((*path, name))}")
        for f in records[name].fields:
            for t in (f.type, f.of, *(case for _, case in f.cases)):
                if t in records:
                    visit(t, (*path, name))

    for name in records:
        visit(name, ())


def _or(codes: list[Code]) -> int:
    out = 0
    for c in codes:
        out |= c.value
    return out


def load(root: Path = ROOT) -> Spec:
    with open(root / SPEC, "rb") as f:
        return Spec(tomllib.load(f))


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.lower().split("_"))


def _hex(v: int) -> str:
    return f"0x{v:X}"


# ------------------------------------------------------------------ C++


def _cpp_comment(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, 80, initial_indent=indent + "// ", subsequent_indent=indent + "// ")


def render_cpp(s: Spec) -> str:
    out = [f"// {line}" for line in LICENSE]
    out += ["//", *_cpp_comment(f"The constants of the IPC protocol (docs/protocol.md), {NOTICE}.")]
    out += ["#pragma once", "", "#include <cstddef>", "#include <cstdint>", ""]
    out += ["namespace tritonpy {", "namespace proto {", ""]
    out += [
        f"constexpr uint32_t kMagic = {_hex(s.magic)};",
        f"constexpr uint8_t kVersion = {s.version};",
    ]
    out += ["", "// The header's fields, at these offsets (all little-endian)."]
    decls = [f"constexpr size_t kHeader{camel(f.name)}Offset = {f.offset};" for f in s.header]
    width = max(map(len, decls))
    out += [f"{d:<{width}}  // {f.type}" for d, f in zip(decls, s.header, strict=True)]
    out.append(f"constexpr size_t kHeaderSize = {s.header_size};")
    for lim in s.limits:
        out += ["", *_cpp_comment(s.doc(lim["doc"]))]
        if isinstance(lim["value"], str):
            out.append(f"constexpr char {lim['cpp']}[] = {_c_string(lim['value'])};")
        else:
            out.append(f"constexpr {lim['cpp_type']} {lim['cpp']} = {lim['value']};")
    out += ["", "// Header flags."]
    out += [f"constexpr uint16_t kFlag{camel(f.name)} = {f.value};" for f in s.flags]
    out += ["", "enum class FrameType : uint8_t {"]
    out += [f"  k{camel(c.name)} = {c.value}," for c in s.frames]
    out += ["};", f"constexpr uint8_t kMaxFrameType = {s.frames[-1].value};"]
    out += ["// FrameTypeName: by type value."]
    out += ["constexpr const char* kFrameTypeNames[kMaxFrameType + 1] = {"]
    out += ['    "UNKNOWN",'] + [f'    "{c.name}",' for c in s.frames] + ["};"]
    out += ["// IsJsonFrame: bit t set when frame type t has a JSON body."]
    out += [f"constexpr uint32_t kJsonFrameTypes = {_hex(_or_bits(s.json_frames))};"]
    out += ["", "// RESPONSES entry flags (response_flags)."]
    for c in s.response_flags:
        out += _cpp_comment(s.doc(c.row["doc"]))
        out.append(f"constexpr uint32_t kResp{camel(c.name)} = {_hex(c.value)}u;")
    out.append(f"constexpr uint32_t kRespKnownFlags = {_hex(s.response_known)}u;")
    out += ["", "// Tensor data locations."]
    for c in s.locations:
        out += _cpp_comment(s.doc(c.row["doc"]))
        out.append(f"constexpr uint8_t kLocation{camel(c.name)} = {c.value};")
    out += ["", "// METRIC operations.", "enum class MetricOpCode : uint8_t {"]
    out += [f"  k{camel(c.name)} = {c.value}," for c in s.metric_ops]
    out += ["};", f"constexpr uint32_t kMaxMetricKind = {s.metric_kinds[-1].value};"]
    out += ["", "// LOG_LEVELS: bit n set = TRITONSERVER_LogLevel n is enabled."]
    out += [f"constexpr uint32_t kLogLevelsAll = {_hex(s.log_levels_all)};"]
    out += ["", *_cpp_comment(_LAYOUT_DOC)]
    limits = {lim["name"] for lim in s.limits}
    for name, value in s.layout_names().items():
        if name not in limits:
            out.append(f"constexpr size_t k{camel(name)} = {value};")
    out += ["", "}  // namespace proto", "}  // namespace tritonpy", ""]
    return "\n".join(out)


_LAYOUT_DOC = (
    "Record layouts (the records of docs/protocol.toml): type widths, then per "
    "record the offsets of its fields at fixed positions, its size when fixed, "
    "its smallest encoding (min size) and, per union case, the record's smallest "
    "encoding with that case."
)


def _or_bits(codes: list[Code]) -> int:
    out = 0
    for c in codes:
        out |= 1 << c.value
    return out


def _c_string(text: str) -> str:
    if any(ch in text for ch in '"\\') or not text.isascii():
        raise SpecError(f"text constant {text!r}: only plain ASCII")
    return f'"{text}"'


# ------------------------------------------------------------------ Python


def python_constants(s: Spec) -> list[tuple[str, str, str]]:
    """(name, value as written, type) of every Python-level constant, in
    order. Bit masks are written in hex."""
    out = [("MAGIC", _hex(s.magic), "int"), ("VERSION", str(s.version), "int")]
    out.append(("HEADER_SIZE", str(s.header_size), "int"))
    for lim in s.limits:
        v = lim["value"]
        out.append((lim["name"], f'"{v}"' if isinstance(v, str) else str(v), type(v).__name__))
    out += [(f"FLAG_{c.name}", str(c.value), "int") for c in s.flags]
    out += [(c.name, str(c.value), "int") for c in s.frames]
    out.append(("MAX_FRAME_TYPE", str(s.frames[-1].value), "int"))
    out += [(f"RESP_{c.name}", _hex(c.value), "int") for c in s.response_flags]
    out.append(("RESP_KNOWN", _hex(s.response_known), "int"))
    out += [(f"LOC_{c.name}", str(c.value), "int") for c in s.locations]
    out += [(f"OP_{c.name}", str(c.value), "int") for c in s.metric_ops]
    out += [(f"METRIC_{c.name}", str(c.value), "int") for c in s.metric_kinds]
    out.append(("MAX_METRIC_KIND", str(s.metric_kinds[-1].value), "int"))
    out += [(f"LOG_{c.name}", str(c.value), "int") for c in s.log_levels]
    out.append(("LOG_LEVELS_ALL", _hex(s.log_levels_all), "int"))
    return out


def _py_assignments(s: Spec) -> list[str]:
    out = [f"{name} = {v}" for name, v, _ in python_constants(s)]
    out += ["JSON_TYPES = {", *(f"    {c.name}," for c in s.json_frames), "}"]
    return out


def render_pxi(s: Spec) -> str:
    out = [f"# {line}" for line in LICENSE]
    out += textwrap.wrap(
        f"The constants of the IPC protocol (docs/protocol.md), {NOTICE}. Included by "
        "_codec.pyx: its Python names are the codec module's.",
        80,
        initial_indent="# ",
        subsequent_indent="# ",
    )
    out += ["", *_py_assignments(s)]
    return "\n".join(out) + "\n"


def render_pxd(s: Spec) -> str:
    """The numbers the compiled modules compare and size with, as C
    constants: cimported, so no module keeps a copy of its own, and a
    compile-time constant costs no load from a module global."""
    out = [f"# {line}" for line in LICENSE]
    out += textwrap.wrap(
        f"The limits, header and record layouts of the IPC protocol (docs/protocol.md) as C "
        f"constants, {NOTICE}. Cimported by the compiled stub modules; Python code "
        "reads the same values from _codec (_wire.pxi).",
        80,
        initial_indent="# ",
        subsequent_indent="# ",
    )
    out += ["", "cdef enum:", f"    WIRE_HEADER_SIZE = {s.header_size}"]
    out += [f"    WIRE_{lim['name']} = {lim['value']}" for lim in s.limits if _c_int(lim)]
    out += ["    # The header's fields, at these offsets (all little-endian)."]
    out += [f"    WIRE_HEADER_{f.name.upper()}_OFFSET = {f.offset}  # {f.type}" for f in s.header]
    out += textwrap.wrap(_LAYOUT_DOC, 76, initial_indent="    # ", subsequent_indent="    # ")
    limits = {lim["name"] for lim in s.limits}
    out += [f"    WIRE_{n} = {v}" for n, v in s.layout_names().items() if n not in limits]
    return "\n".join(out) + "\n"


def _c_int(lim: dict[str, Any]) -> bool:
    """Whether a limit fits a C enum (an int); text constants do not."""
    v = lim["value"]
    return isinstance(v, int) and 0 <= v < 2**31


def region_pyi(s: Spec) -> str:
    lines = [f"{name}: {kind}" for name, _, kind in python_constants(s)]
    return "\n".join([*lines, "JSON_TYPES: set[int]"])


def region_ref(s: Spec) -> str:
    fmt = "<" + "".join(_INTS[f.type][1] for f in s.header)
    lines = [
        *_py_assignments(s),
        f'HEADER_FORMAT = "{fmt}"  # {", ".join(f.name for f in s.header)}',
    ]
    lines += ["TYPE_NAMES = {", *(f'    {c.name}: "{c.name}",' for c in s.frames), "}"]
    return "\n".join(lines)


# ------------------------------------------------------------------ docs


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def region_doc_header(s: Spec) -> str:
    rows = [[str(f.offset), f"`{f.type} {f.name}`", s.doc(f.doc)] for f in s.header]
    return "\n".join(_table(["offset", "field", "value"], rows))


def region_doc_frames(s: Spec) -> str:
    rows = [
        [
            str(c.value),
            f"`{c.name}`",
            c.row["direction"],
            c.row["id"],
            "JSON" if c.row.get("json", False) else "",
        ]
        for c in s.frames
    ]
    return "\n".join(_table(["type", "name", "direction", "id", "body"], rows))


def region_doc_codes(s: Spec) -> str:
    def frames(c: Code) -> str:
        return "any" if c.row["frames"] == "any" else f"`{c.row['frames']}`"

    out = ["Header flags (`flags`):", ""]
    out += _table(
        ["bit value", "name", "frames", "meaning"],
        [[str(c.value), f"`{c.name}`", frames(c), s.doc(c.row["doc"])] for c in s.flags],
    )
    out += ["", "Response flags (`response_flags` of a `RESPONSES` entry):", ""]
    out += _table(
        ["value", "name", "meaning"],
        [[_hex(c.value), f"`{c.name}`", s.doc(c.row["doc"])] for c in s.response_flags],
    )
    out += ["", "Tensor locations (`location`):", ""]
    out += _table(
        ["value", "name", "the bytes are"],
        [[str(c.value), f"`{c.name}`", s.doc(c.row["doc"])] for c in s.locations],
    )
    out += ["", "Metric operations (`op` of `METRIC`), metric kinds and log levels:", ""]
    groups = (("op", s.metric_ops), ("kind", s.metric_kinds), ("log level", s.log_levels))
    out += _table(
        ["code", "values"],
        [[what, ", ".join(f"{c.name}={c.value}" for c in g)] for what, g in groups],
    )
    return "\n".join(out)


def region_doc_limits(s: Spec) -> str:
    rows = []
    for lim in s.limits:
        v = lim["value"]
        value = f'`"{v}"`' if isinstance(v, str) else f"{v}"
        rows.append([f"`{lim['name']}`", value, s.doc(lim["doc"])])
    return "\n".join(_table(["name", "value", "meaning"], rows))


def region_doc_records(s: Spec) -> str:
    def field(f: RecordField) -> str:
        if f.type == "list":
            return f"`{f.name}`: list of {f.of}"
        if f.type == "union":
            return f"`{f.name}`: by `{f.tag}`"
        return f"`{f.name}`: {f.type}"

    rows = []
    for rec in s.records.values():
        layout = dict(s.layout(rec))
        size = str(layout["SIZE"]) if "SIZE" in layout else ""
        frames = ", ".join(f"`{f}`" for f in rec.frames)
        fields = ", ".join(map(field, rec.fields)) or "(empty)"
        rows.append([f"`{rec.name}`", frames, fields, size, str(layout["MIN_SIZE"])])
    return "\n".join(_table(["record", "body of", "fields", "size", "smallest"], rows))


# ------------------------------------------------------------------ files

_REGIONS = {
    PYI: {"constants": region_pyi},
    REF: {"constants": region_ref},
    DOC: {
        "header": region_doc_header,
        "frame types": region_doc_frames,
        "codes": region_doc_codes,
        "limits": region_doc_limits,
        "records": region_doc_records,
    },
}


def _markers(path: str, name: str) -> tuple[str, str]:
    begin, end = f"BEGIN generated ({name}) {_BY}", f"END generated ({name})"
    if path.endswith(".md"):
        return f"<!-- {begin} -->", f"<!-- {end} -->"
    return f"# {begin}", f"# {end}"


def fill_regions(path: str, text: str, spec: Spec) -> str:
    """``text`` with each generated region of ``path`` rewritten."""
    for name, render in _REGIONS[path].items():
        begin, end = _markers(path, name)
        pattern = re.compile(
            rf"^{re.escape(begin)}\n.*?^{re.escape(end)}$", re.MULTILINE | re.DOTALL
        )
        if len(pattern.findall(text)) != 1:
            raise SpecError(f"{path}: the lines {begin!r} ... {end!r} must appear once")
        filled = f"{begin}\n{render(spec)}\n{end}"
        text = pattern.sub(lambda _m, filled=filled: filled, text)  # type: ignore[misc]
    return text


def expected(root: Path = ROOT) -> dict[str, str]:
    """What each generated file holds, by path under ``root``."""
    spec = load(root)
    render = {CPP_HEADER: render_cpp, PXI: render_pxi, PXD: render_pxd}
    out = {path: render[path](spec) for path in WHOLE_FILES}
    for path in _REGIONS:
        out[path] = fill_regions(path, (root / path).read_text(), spec)
    return out


def drift(root: Path = ROOT) -> list[str]:
    """The generated files under ``root`` that differ from the spec."""
    stale = []
    for path, text in expected(root).items():
        f = root / path
        if not f.exists() or f.read_text() != text:
            stale.append(path)
    return stale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only list the files that differ")
    args = p.parse_args(argv)
    try:
        stale = drift()
        if args.check:
            for path in stale:
                print(f"{path}: differs from {SPEC} (run `make wire`)")
            return 1 if stale else 0
        for path, text in expected().items():
            if path in stale:
                (ROOT / path).write_text(text)
                print(f"wrote {path}")
    except SpecError as e:
        print(f"gen_wire: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
