# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Every benchmark figure in the README and the docs comes from the result
file committed with it: docs/benchmarks/bench.json (what `make bench`
publishes, with the pages), docs/benchmarks/stub_cost.json (`python -m
bench.stub_cost --json`) and docs/benchmarks/hops.json (`python -m
bench.hops --publish`). Each figure is rendered again from its file here
and must be in the page as it is: a figure changed by hand, or a result
file changed without its pages, fails.

And no page holds a result that no file backs. The rule (`unbacked`):

- A *figure* is a number with a unit: a duration (ns, µs, us, ms, s,
  min), a size (B, bytes, KiB, MiB, GiB, KB, MB, GB), a share (%), a
  ratio (``3x``, or with the multiplication sign), a rate (anything ``/s``); a range (``13-18 µs``)
  is one figure, and so is a count in thousands (``35.3k``). In a table,
  a cell that is only a number is a figure when its column's header has
  such a unit.
- It is a *result* when it was measured: its sentence (its row and header,
  in a table) speaks of a measurement (took, measured, median, p50, p99,
  PSS, RSS, CPU, tokens/s, req/s, throughput, latency, TTFT, per token,
  per request, faster, slower, "in the run"), or the figure is
  approximate ("about 9 GiB").
- Not results: a bound, introduced by under, less than, at most, at
  least, over, above, below, within, up to, after or every, or followed by
  "or more" (a threshold, a timer, a limit); and any figure on a line that
  names the test that checks it (``test_...``, ``tests/...``): the test's
  own input or bound. Defaults, limits and sizes of the format carry no
  measurement word and are not results either.
- A result must stand between ``<!-- bench:NAME -->`` markers (rendered
  from bench.json by bench/published.py), or in what report.py renders
  into docs/benchmarks.md, both checked above; otherwise it fails here.
  Code blocks are not read."""

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
from bench import hops, published, report  # noqa: E402

DOC = published.load()
STUB_COST = json.loads((ROOT / "docs" / "benchmarks" / "stub_cost.json").read_text())
HOPS = hops.load()


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
    assert report.markdown(report.main_run(DOC)) in text
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
    assert found or report.markdown(report.main_run(drifted)) not in page("docs/benchmarks.md")


def test_filling_the_pages_again_changes_nothing() -> None:
    for path in published.PAGES:
        text = path.read_text()
        assert published.fill(text, DOC) == text, path.name


def test_the_hops_section_is_the_result_file_s() -> None:
    # docs/benchmarks/hops.json (python -m bench.hops --publish), and the
    # stub's instruction counts it quotes from stub_cost.json.
    assert HOPS is not None
    assert hops.section(HOPS) in page("docs/benchmarks.md")
    drifted = copy.deepcopy(HOPS)
    drifted["systems"]["tritonpy"]["hops"][6]["median_us"] += 1.0
    assert hops.section(drifted) not in page("docs/benchmarks.md")


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


# ------------------------------------------------------------ no result without a file

_NUM = r"\d[\d,]*(?:\.\d+)?"
_UNIT = r"(?:ns|µs|us|ms|s|min|B|bytes|KiB|MiB|GiB|KB|MB|GB|%|x|×)"
_RATE = r"(?:[\w.]+/s)"
FIGURE = re.compile(
    rf"(?<![\w.$`-]){_NUM}(?:\s?[-–]\s?{_NUM})?\s?k?\s?(?:{_RATE}|{_UNIT})(?![\w/])"
    rf"|(?<![\w.$`-])(?<!/ ){_NUM}k(?![\w/])"  # not a unit's "per 1k"
)
UNIT_IN_HEADER = re.compile(rf"(?<!\w){_UNIT}(?!\w)|/s\b|µs")
MEASURED = re.compile(
    r"\b(?:took|measured|median|p50|p99|PSS|RSS|CPU|tokens/s|req/s|MiB/s|per token|"
    r"per request|throughput|latency|TTFT|in the run|faster|slower)\b|µs/",
    re.IGNORECASE,
)
APPROXIMATE = re.compile(r"about\s+$")
BOUND = re.compile(
    r"(?:under|less than|at most|at least|over|above|below|within|up to|after|every)"
    r"\s+(?:about\s+)?$"
)
NAMES_A_TEST = re.compile(r"\btest_\w+|\btests/")
ITEM = re.compile(r"\s*(?:[-*]|\d+\.)\s")
SEPARATOR = re.compile(r"\|[-| :]+\|$")
# Sections whose figures are still to be regenerated from a committed
# result: (page, heading of the section) -> the figures still unbacked
# there, or None for the whole section. Each must still hold an unbacked
# figure, so an entry goes once its section is backed. None today.
PENDING: dict[tuple[str, str], set[str] | None] = {}


def _blank(text: str, part: str) -> str:
    """``text`` with ``part`` (where it occurs) made spaces, lines kept."""
    i = text.find(part) if part.strip() else -1
    if i < 0:
        return text
    return text[:i] + re.sub(r"[^\n]", " ", part) + text[i + len(part) :]


def _prose(lines: list[str]) -> list[tuple[int, str, list[int]]]:
    """The paragraphs of ``lines`` that are prose: (first line index, the
    lines joined by spaces, where each line starts in that text)."""
    out = []
    i = 0
    while i < len(lines):
        if not lines[i].strip() or lines[i].startswith(("|", "#")):
            i += 1
            continue
        j, starts, at = i, [], 0
        while j < len(lines) and lines[j].strip() and not lines[j].startswith(("|", "#")):
            if j > i and ITEM.match(lines[j]):
                break  # a list item is a paragraph of its own
            starts.append(at)
            at += len(lines[j]) + 1
            j += 1
        out.append((i, " ".join(lines[i:j]), starts))
        i = j
    return out


def _sentence(text: str, start: int, end: int) -> str:
    """The clause of ``text`` around ``text[start:end]``: from the last
    ``.``, ``;`` or ``:`` before it to the next one (each followed by a space)."""
    cuts = [m.end() for m in re.finditer(r"[.;:]\s", text[:start])]
    after = re.search(r"[.;:]\s", text[end:])
    return text[cuts[-1] if cuts else 0 : end + after.start() if after else len(text)]


def unbacked(text: str) -> list[tuple[int, str, str]]:
    """The results in the page ``text`` that no marker backs: (line
    number, figure, heading of its section). The rule is the module's
    docstring's."""
    text = published.MARKED.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    text = re.sub(r"```.*?```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    lines = text.split("\n")
    headings, heading = [], ""
    for line in lines:
        heading = line.lstrip("#").strip() if line.startswith("#") else heading
        headings.append(heading)
    found = []
    for first, para, starts in _prose(lines):
        for m in FIGURE.finditer(para):
            no = first + sum(1 for s in starts if s <= m.start())
            if NAMES_A_TEST.search(lines[no - 1]):
                continue
            if BOUND.search(para[: m.start()][-16:]) or para[m.end() :].startswith(" or more"):
                continue
            if MEASURED.search(_sentence(para, m.start(), m.end())) or APPROXIMATE.search(
                para[: m.start()][-8:]
            ):
                found.append((no, m.group(0), headings[no - 1]))
    header = None
    for no, line in enumerate(lines, 1):
        header = (header or line) if line.startswith("|") else None
        if header is None or SEPARATOR.match(line.strip()) or NAMES_A_TEST.search(line):
            continue
        where = f"{header} {line}"
        if not MEASURED.search(where):
            figures = [
                m for m in FIGURE.finditer(line) if APPROXIMATE.search(line[: m.start()][-8:])
            ]
        else:
            figures = [
                m
                for m in FIGURE.finditer(line)
                if not BOUND.search(line[: m.start()][-16:])
                and not line[m.end() :].startswith(" or more")
            ]
        found += [(no, m.group(0), headings[no - 1]) for m in figures]
        if line is not header and MEASURED.search(where):
            heads = [h.strip() for h in header.strip().strip("|").split("|")]
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            for head, cell in zip(heads, cells, strict=False):
                if re.fullmatch(_NUM, cell) and UNIT_IN_HEADER.search(head):
                    found.append((no, f"{cell} ({head})", headings[no - 1]))
    return sorted(found)


def _page_results(path: Path) -> list[tuple[int, str, str]]:
    text = path.read_text()
    if path.name == "benchmarks.md":  # report.py's text, checked above
        for part in (
            report.markdown(report.main_run(DOC)),
            f"Headline: {report.headline(DOC)}.",
            report._settings_text(DOC),
        ):
            text = _blank(text, part)
        # The separate runs' section: test_bench_separate.py ties it to
        # docs/benchmarks/separate.json.
        text = _blank(text, report.separate_section(published.load_separate()))
        # The hop-by-hop section: tied to docs/benchmarks/hops.json above.
        text = _blank(text, hops.section(HOPS))
    if path.name == "performance.md":  # likewise to fork_memory.json
        from bench import fork_memory

        result = json.loads((ROOT / "docs" / "benchmarks" / "fork_memory.json").read_text())
        text = _blank(text, fork_memory.table(result))
    return unbacked(text)


def test_no_page_holds_a_result_without_its_file() -> None:
    bad, pending = [], set()
    for path in published.PAGES:
        name = str(path.relative_to(ROOT))
        for no, figure, heading in _page_results(path):
            figures = PENDING.get((name, heading), set())
            if figures is None or figure in figures:
                pending.add((name, heading))
            else:
                bad.append(f"{name}:{no} ({heading}): {figure}")
    assert not bad, "results with no result file behind them:\n" + "\n".join(bad)
    assert pending == set(PENDING), f"backed now, drop from PENDING: {set(PENDING) - pending}"


@pytest.mark.parametrize(
    "text,results",
    [
        ("One request with 20000 parameters took 1.4 s here.", ["1.4 s"]),
        ("The server exits about 2-3 s after SIGTERM.", ["2-3 s"]),
        ("Server CPU per token was 13-18 µs in every run.", ["13-18 µs"]),
        ("gRPC gave 45.9k and 39.3k tokens/s before.", ["39.3k tokens/s", "45.9k"]),
        ("| n | tokens/s | CPU µs/token |\n|---|---|---|\n| 64 | 35.3k | 15 |", None),
        ("Arenas are 64 MiB by default.", []),
        ("A batch that took 1 ms or more is answered at once.", []),
        ("The reader polls every 10 ms; within about 10 ms the model sees it.", []),
        ("RSS grows less than 5% (`test_leaks.py::test_rss`), 5 × 600 streams.", []),
        ("Kept: <!-- bench:x -->took 9.9 ms<!-- /bench -->.", []),
        ("```\nit took 3 s\n```", []),
    ],
)
def test_the_rule_tells_results_from_other_figures(text: str, results: list[str] | None) -> None:
    got = [figure for _, figure, _ in unbacked(text)]
    if results is None:  # a table: its bare and thousands cells
        assert got == ["15 (CPU µs/token)", "35.3k"], got
    else:
        assert got == results, got
