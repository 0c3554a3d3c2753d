# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A codec that knows nothing but docs/protocol.toml: it encodes and
decodes frame bodies by walking the records of the spec (tools/gen_wire.py
reads and checks them), in the decoded form of tests/protocol_ref.py.

It is slow and lenient on purpose (no limits, no value checks): it is the
yardstick tests/unit/test_wire_drift.py holds every real codec against, so
that a codec and the spec cannot drift apart unnoticed."""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _gen_wire() -> Any:
    if "gen_wire" in sys.modules:
        return sys.modules["gen_wire"]
    spec = importlib.util.spec_from_file_location("gen_wire", ROOT / "tools" / "gen_wire.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_wire"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


G = _gen_wire()
_FORMATS = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i64": "q", "f64": "d"}


class SpecCodec:
    def __init__(self, root: Path = ROOT) -> None:
        self.spec = G.load(root)
        self.header = struct.Struct("<" + "".join(_FORMATS[f.type] for f in self.spec.header))
        self.types = {c.name: c.value for c in self.spec.frames}

    # ------------------------------------------------------------ encode

    def encode(self, ftype: str, body: dict[str, Any], fid: int = 0, flags: int = 0) -> bytes:
        """One whole frame of type ``ftype`` (a name) with ``body``."""
        out = bytearray(self.spec.header_size)  # pad8 counts from the frame's start
        self._record(self.spec.body_of[ftype], body, out)
        values = {"magic": self.spec.magic, "version": self.spec.version, "reserved": 0}
        values.update(type=self.types[ftype], flags=flags, id=fid)
        values["body_len"] = len(out) - self.spec.header_size
        out[: self.spec.header_size] = self.header.pack(*(values[f.name] for f in self.spec.header))
        return bytes(out)

    def _record(self, rec: Any, value: Any, out: bytearray) -> None:
        if rec.positional:
            value = dict(zip((f.name for f in rec.fields), value, strict=True))
        for f in rec.fields:
            self._field(f, value, out)

    def _field(self, f: Any, value: dict[str, Any], out: bytearray) -> None:
        if f.type == "zero32":
            out += bytes(4)
        elif f.type in _FORMATS:
            out += struct.pack("<" + _FORMATS[f.type], value[f.name])
        elif f.type == "str":
            self._item("str", value[f.name], out)
        elif f.type == "list":
            items = value[f.name]
            out += struct.pack("<I", len(items))
            for item in items:
                self._item(f.of, item, out)
        elif f.type == "tensor_data":
            if value["location"] == 0:
                out += bytes(-len(out) % 8)
                out += bytes.fromhex(value["data_hex"])
            else:
                self._record(self.spec.records["arena_ref"], value, out)
        elif f.type == "union":
            self._record(self._case(f, value), value if f.flat else value[f.name], out)
        else:
            self._record(self.spec.records[f.type], value if f.flat else value[f.name], out)

    def _item(self, type_: str, item: Any, out: bytearray) -> None:
        if type_ == "str":
            raw = item.encode()
            out += struct.pack("<I", len(raw)) + raw
        elif type_ in _FORMATS:
            out += struct.pack("<" + _FORMATS[type_], item)
        else:
            self._record(self.spec.records[type_], item, out)

    def _case(self, f: Any, value: dict[str, Any]) -> Any:
        code = next(c.name for c in self.spec.codes(f.codes) if c.value == value[f.tag])
        return self.spec.records[dict(f.cases)[code]]

    # ------------------------------------------------------------ decode

    def decode(self, frame: bytes) -> dict[str, Any]:
        """``{"type", "id", "flags", "body"}`` of one whole frame."""
        head = dict(
            zip((f.name for f in self.spec.header), self.header.unpack_from(frame), strict=True)
        )
        name = next(c.name for c in self.spec.frames if c.value == head["type"])
        pos = [self.spec.header_size]
        body = self._read_record(self.spec.body_of[name], frame, pos)
        if pos[0] != len(frame):
            raise ValueError(f"{name}: {len(frame) - pos[0]} bytes after the body")
        return {"type": name, "id": head["id"], "flags": head["flags"], "body": body}

    def _take(self, buf: bytes, pos: list[int], n: int) -> bytes:
        if pos[0] + n > len(buf):
            raise ValueError(f"truncated at {pos[0]}")
        pos[0] += n
        return buf[pos[0] - n : pos[0]]

    def _read_record(self, rec: Any, buf: bytes, pos: list[int]) -> Any:
        out: dict[str, Any] = {}
        for f in rec.fields:
            self._read_field(f, buf, pos, out)
        return [out[f.name] for f in rec.fields] if rec.positional else out

    def _read_field(self, f: Any, buf: bytes, pos: list[int], out: dict[str, Any]) -> None:
        if f.type == "zero32":
            if any(self._take(buf, pos, 4)):
                raise ValueError(f"reserved field {f.name} is not zero")
        elif f.type in _FORMATS or f.type == "str":
            out[f.name] = self._read_item(f.type, buf, pos)
        elif f.type == "list":
            (n,) = struct.unpack("<I", self._take(buf, pos, 4))
            out[f.name] = [self._read_item(f.of, buf, pos) for _ in range(n)]
        elif f.type == "tensor_data":
            if out["location"] == 0:
                self._take(buf, pos, -pos[0] % 8)
                out["data_hex"] = self._take(buf, pos, out["byte_size"]).hex()
            else:
                out.update(self._read_record(self.spec.records["arena_ref"], buf, pos))
        else:
            rec = self._case(f, out) if f.type == "union" else self.spec.records[f.type]
            value = self._read_record(rec, buf, pos)
            if f.flat:
                out.update(value)
            else:
                out[f.name] = value

    def _read_item(self, type_: str, buf: bytes, pos: list[int]) -> Any:
        if type_ == "str":
            (n,) = struct.unpack("<I", self._take(buf, pos, 4))
            return self._take(buf, pos, n).decode("utf-8", "replace")
        if type_ in _FORMATS:
            fmt = "<" + _FORMATS[type_]
            return struct.unpack(fmt, self._take(buf, pos, struct.calcsize(fmt)))[0]
        return self._read_record(self.spec.records[type_], buf, pos)


def first_difference(got: Any, want: Any, path: str = "frame") -> str | None:
    """Where ``got`` and ``want`` first differ, field by field (``None``
    when they are equal): ``frame.body.requests[0].timeout_us: 5 != 6``."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in want.keys() | got.keys():
            if key not in got or key not in want:
                return f"{path}.{key}: present on one side only"
            where = first_difference(got[key], want[key], f"{path}.{key}")
            if where:
                return where
        return None
    if isinstance(want, list | tuple) and isinstance(got, list | tuple):
        if len(got) != len(want):
            return f"{path}: {len(got)} items != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            where = first_difference(g, w, f"{path}[{i}]")
            if where:
                return where
        return None
    return None if got == want else f"{path}: {got!r} != {want!r}"
