# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The wire format's constants are written once, in docs/protocol.toml:
every file generated from it (tools/gen_wire.py, `make wire`) must be what
the generator writes now, and the installed codec must hold the same
values."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("tomllib", reason="tools/gen_wire.py reads the spec with Python 3.11's tomllib")
from spec_codec import G  # noqa: E402  (tools/gen_wire.py)

ROOT = Path(__file__).resolve().parents[2]


def test_generated_files_match_the_spec() -> None:
    stale = G.drift(ROOT)
    assert not stale, f"{stale} differ from docs/protocol.toml: run `make wire`"


# One hand edit per generated file, each in the part the generator writes.
HAND_EDITS = [
    (G.CPP_HEADER, "kMaxFrame = 131072", "kMaxFrame = 131073"),
    (G.PXI, "MAX_FRAME = 131072", "MAX_FRAME = 131073"),
    (G.PXD, "WIRE_MAX_FRAME = 131072", "WIRE_MAX_FRAME = 131073"),
    (G.CPP_HEADER, "kTensorMinSize = 21", "kTensorMinSize = 20"),
    (G.PXD, "WIRE_TENSOR_MIN_SIZE = 21", "WIRE_TENSOR_MIN_SIZE = 20"),
    (G.PYI, "MAX_FRAME: int\n", ""),
    (G.REF, "MAX_FRAME = 131072", "MAX_FRAME = 131073"),
    (G.DOC, "| 29 | `LOG_LEVELS` |", "| 30 | `LOG_LEVELS` |"),
]


@pytest.mark.parametrize(("path", "old", "new"), HAND_EDITS, ids=[e[0] for e in HAND_EDITS])
def test_a_hand_edited_copy_is_found(tmp_path: Path, path: str, old: str, new: str) -> None:
    for rel in [G.SPEC, *G.expected(ROOT)]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    assert G.drift(tmp_path) == []
    text = (tmp_path / path).read_text()
    assert text.count(old) == 1
    (tmp_path / path).write_text(text.replace(old, new))
    assert G.drift(tmp_path) == [path]


def test_a_removed_region_marker_is_an_error(tmp_path: Path) -> None:
    for rel in [G.SPEC, *G.expected(ROOT)]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    doc = tmp_path / G.DOC
    doc.write_text(doc.read_text().replace("<!-- END generated (limits) -->\n", ""))
    with pytest.raises(G.SpecError, match="limits"):
        G.drift(tmp_path)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (('value = 2\nname = "INIT"', 'value = 3\nname = "INIT"'), "used twice|without gaps"),
        (('value = 29\nname = "LOG_LEVELS"', 'value = 31\nname = "LOG_LEVELS"'), "gaps"),
        (('name = "BATCH_DONE"\nvalue = 2', 'name = "BATCH_DONE"\nvalue = 3'), "single bit"),
        (('field = "version"\ntype = "u8"', 'field = "version"\ntype = "u16"'), "aligned"),
        (('{ name = "dtype", type = "u32" }', '{ name = "dtype", type = "u31" }'), "unknown type"),
        ((', VALUE = "op_metric" }', " }"), "must cover"),
        (("value = 16\ndoc = ", "value = 24\ndoc = "), "differs from the record layout"),
        (('frames = ["LOG_LEVELS"]', "frames = []"), "without a body record"),
    ],
)
def test_the_spec_keeps_the_rules_the_codecs_rely_on(
    tmp_path: Path, edit: tuple[str, str], why: str
) -> None:
    text = (ROOT / G.SPEC).read_text()
    assert text.count(edit[0]) == 1
    (tmp_path / "docs").mkdir()
    (tmp_path / G.SPEC).write_text(text.replace(*edit))
    with pytest.raises(G.SpecError, match=why):
        G.load(tmp_path)


def test_the_installed_codec_holds_the_spec() -> None:
    """The compiled stub codec was built from the generated _wire.pxi (a
    stale installation fails here: `make setup`)."""
    from tritonpy.stub import _codec as C

    spec = G.load(ROOT)
    for name, value, _ in G.python_constants(spec):
        assert getattr(C, name) == ast.literal_eval(value), name
    assert {getattr(C, c.name) for c in spec.json_frames} == C.JSON_TYPES


def test_the_frame_size_is_written_once() -> None:
    """Outside the generated files no source under src/ or backend/ keeps a
    copy of the frame size (an alias or the number): a copy would go on
    with the old value when the spec changes."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    found = subprocess.run(
        [
            "git",
            "grep",
            "-n",
            "--untracked",
            "-e",
            "MAX_FRAME = ",
            "-e",
            "131072",
            "--",
            "src",
            "backend",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    files = {line.split(":", 1)[0] for line in found}
    assert set(G.WHOLE_FILES) <= files, "the generated copies are the grep's own check"
    assert [line for line in found if line.split(":", 1)[0] not in G.WHOLE_FILES] == []
