# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Every benchmark figure in the README and the docs comes from the result
file committed with it: docs/benchmarks/bench.json (what `make bench`
publishes, with the pages) and docs/benchmarks/stub_cost.json (`python -m
bench.stub_cost --json`). Each figure is rendered again from its file here
and must be in the page as it is: a figure changed by hand, or a result
file changed without its pages, fails."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench/
from bench import published, report  # noqa: E402

DOC = published.load()
STUB_COST = json.loads((ROOT / "docs" / "benchmarks" / "stub_cost.json").read_text())


def page(name: str) -> str:
    return (ROOT / name).read_text()


def test_every_marked_figure_is_the_result_file_s() -> None:
    seen = set()
    for path in published.PAGES:
        for name, text in published.marked(path.read_text()):
            assert name in published.FIGURES, f"{path.name}: no figure named {name!r}"
            expected = published.FIGURES[name](DOC)
            assert text == expected, (
                f"{path.relative_to(ROOT)}: figure {name!r} reads {text!r}, "
                f"docs/benchmarks/bench.json gives {expected!r}"
            )
            seen.add(name)
    # Each way of rendering a figure is used somewhere.
    assert seen == set(published.FIGURES), set(published.FIGURES) - seen


def test_the_readme_table_is_marked() -> None:
    names = [name for name, _ in published.marked(page("README.md"))]
    assert names.count("readme_table") == 1


def test_the_benchmarks_page_is_the_result_file_s() -> None:
    text = page("docs/benchmarks.md")
    assert report.markdown(DOC) in text
    assert f"Headline: {report.headline(DOC)}." in text
    assert report._settings_text(DOC) in text


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["scenarios"][0]["ratios"]["p50_us"].update({"tritonpy/official": 0.5}),
        lambda d: d["scenarios"][-1]["results"]["tritonpy"]["metrics"]["load_s"].update(
            {"median": 9.9}
        ),
        lambda d: next(s for s in d["scenarios"] if s["id"] == "llm_s64")["results"]["floor"][
            "metrics"
        ]["tok_s"].update({"median": 1.0}),
        lambda d: d.update({"date": "2026-01-01 00:00 UTC"}),
    ],
)
def test_a_figure_that_drifts_from_the_result_file_is_found(change: Any) -> None:
    drifted = copy.deepcopy(DOC)
    change(drifted)
    found = [
        name
        for path in published.PAGES
        for name, text in published.marked(path.read_text())
        if published.FIGURES[name](drifted) != text
    ]
    assert found or report.markdown(drifted) not in page("docs/benchmarks.md")


def test_filling_the_pages_again_changes_nothing() -> None:
    for path in published.PAGES:
        text = path.read_text()
        assert published.fill(text, DOC) == text, path.name


def test_the_stub_cost_table_is_the_result_file_s() -> None:
    text = page("docs/performance.md")
    counts = STUB_COST["instructions_per_request"]
    assert set(counts) == {"empty", "outputs", "add_sub", "stream", "bls"}
    for model, count in counts.items():
        row = re.search(rf"^\| `{model}`[^|]*\| ([\d,]+) \|", text, re.MULTILINE)
        assert row is not None, model
        assert row.group(1) == f"{count:,}", (
            f"docs/performance.md says {row.group(1)} instructions for {model}, "
            f"docs/benchmarks/stub_cost.json {count:,}"
        )
