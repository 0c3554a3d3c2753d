# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""docs/reliability.md names the test that holds each promise: every name
must be a test that exists (`…::name` means the file named before it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_named_in_reliability_md_exists() -> None:
    doc = (ROOT / "docs" / "reliability.md").read_text()
    refs = re.findall(r"`((?:[\w/]+\.py|…)::(\w+))(?:\[[^\]]*\])?`", doc)
    assert len(refs) > 30, refs
    last = None
    for ref, name in refs:
        path = ref.split("::")[0]
        if path == "…":
            assert last is not None, ref
            path = last
        last = path
        source = (ROOT / "tests" / path).read_text()
        assert re.search(rf"^def {name}\(", source, re.M), f"{path}::{name} is not a test"
