# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The separate runs' section of docs/benchmarks.md (many_instances,
many_models, shared_weights) is the one its committed result file,
docs/benchmarks/separate.json, renders; publishing such a run rewrites
that section and nothing else of the page."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench/
from bench import published, report  # noqa: E402
from bench.scenarios import Config, many_scenarios  # noqa: E402

PAGE = ROOT / "docs" / "benchmarks.md"
WORK = ROOT / "bench" / "work"


def test_the_section_is_the_result_file_s() -> None:
    doc = published.load_separate()
    assert report.separate_section(doc) in PAGE.read_text()


def test_a_run_of_other_scenarios_is_not_separate() -> None:
    doc = published.load()
    assert not report.is_separate(doc)


@pytest.mark.skipif(not published.SEPARATE_RESULT.exists(), reason="no separate run published")
def test_a_drifted_figure_is_found() -> None:
    doc = published.load_separate()
    assert doc is not None and report.is_separate(doc)
    drifted = copy.deepcopy(doc)
    sc = next(s for s in drifted["scenarios"] if s["results"]["tritonpy"].get("metrics"))
    metric = next(iter(sc["results"]["tritonpy"]["metrics"].values()))
    metric["median"] = metric["median"] * 3 + 1
    assert report.separate_section(drifted) not in PAGE.read_text()


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """docs/benchmarks.md with the separate runs' section between two
    lines, in a docs folder of the test's own where publishing writes."""
    docs = tmp_path / "docs"
    (docs / "benchmarks").mkdir(parents=True)
    page = docs / "benchmarks.md"
    page.write_text(f"before\n\n{report.separate_section(None)}\n\nafter\n")
    monkeypatch.setattr(report, "DOCS", docs)
    monkeypatch.setattr(published, "SEPARATE_RESULT", docs / "benchmarks" / "separate.json")
    # A full run's publishing writes its result file and fills the pages.
    monkeypatch.setattr(published, "RESULT", docs / "benchmarks" / "bench.json")
    monkeypatch.setattr(published, "PAGES", [])
    return page


def test_publishing_rewrites_the_section_alone(page: Path) -> None:
    cfg = Config(many_sizes=(2,))
    scenarios = [s for s in many_scenarios(cfg) if s.id == "many_instances_n2"]
    figures = {"pss_mib": 90.0, "server_rss_mib": 40.0, "load_s": 1.5, "rps": 900.0}
    results = {
        "many_instances_n2": {
            "tritonpy": [{"status": "ok", "metrics": figures}],
            "official": [
                {"status": "failed", "reason": f"`{ROOT}/.venv/bin/python -m x` could not start"}
            ],
        }
    }
    doc = report.build_doc(cfg, scenarios, ["tritonpy", "official"], results, 1, 60, "a command")
    report.publish(doc, report.markdown(doc), [])
    text = page.read_text()
    assert text.startswith("before\n\n") and text.endswith("\n\nafter\n")
    written = published.load_separate()
    assert report.separate_section(written) in text
    assert "many_instances 2" in text
    # No path of the machine it ran on: the checkout's are relative.
    assert "`.venv/bin/python -m x` could not start" in text
    assert str(ROOT) not in text and str(ROOT) not in published.SEPARATE_RESULT.read_text()


def test_a_published_file_names_work_files_as_reasons_do(page: Path) -> None:
    """Publishing a run writes its result file and page with the work
    files as ``<work>/name``, not by the checkout's work folder."""
    cfg = Config(many_sizes=(2,))
    scenarios = [s for s in many_scenarios(cfg) if s.id == "many_instances_n2"]
    log = WORK / "many" / "server.log"
    results = {
        "many_instances_n2": {
            "tritonpy": [{"status": "failed", "reason": f"no stub started, see {log}"}],
        }
    }
    command = f"python -m bench --out {WORK}/many --python {ROOT}/.venv/bin/python"
    doc = report.build_doc(cfg, scenarios, ["tritonpy"], results, 1, 60, command)
    report.publish(doc, report.markdown(doc), [])
    for text in (published.SEPARATE_RESULT.read_text(), page.read_text()):
        assert str(ROOT) not in text and "bench/work" not in text
        assert "see <work>/many/server.log" in text
    written = published.load_separate()
    assert written is not None
    assert written["command"] == "python -m bench --out <work>/many --python .venv/bin/python"
    assert report._relative({"a": [f"{WORK}/x.csv"], "n": 1}) == {"a": ["<work>/x.csv"], "n": 1}


def test_the_fork_memory_table_is_its_result_file_s() -> None:
    from bench import fork_memory

    result = json.loads((ROOT / "docs" / "benchmarks" / "fork_memory.json").read_text())
    assert fork_memory.table(result) in (ROOT / "docs" / "performance.md").read_text()


def _full_run(load_s: float, date: str) -> dict:
    """A run of a page scenario and a separate one (tritonpy's many_instances
    2 loaded in ``load_s``), dated ``date``."""
    from bench.scenarios import build

    cfg = Config(many_sizes=(2,))
    scenarios = [s for s in build(cfg) if s.id in ("sandboxed_start", "many_instances_n2")]
    figures = {"pss_mib": 90.0, "server_rss_mib": 40.0, "load_s": load_s, "rps": 900.0}
    results = {
        "sandboxed_start": {"tritonpy": [{"status": "failed", "reason": "not run"}]},
        "many_instances_n2": {"tritonpy": [{"status": "ok", "metrics": figures}]},
    }
    doc = report.build_doc(cfg, scenarios, ["tritonpy"], results, 1, 60, "make bench")
    doc["date"] = date
    return doc


def test_a_full_run_shows_each_scenario_once(page: Path) -> None:
    """A full run's table leaves out the separate scenarios; the separate
    runs' section shows them from whichever run is the newer."""
    newer = _full_run(1.5, "2026-02-02 00:00 UTC")
    report.publish(newer, report.markdown(newer), [])
    text = page.read_text()
    assert text.count("| many_instances 2 |") == 1, text
    assert "loaded in 1.5 s" in text
    assert report.markdown(report.main_run(published.load(published.RESULT))) in text
    # An older full run (re-rendered, say) leaves the newer figures alone.
    older = _full_run(7.5, "2026-01-01 00:00 UTC")
    report.publish(older, report.markdown(older), [])
    text = page.read_text()
    assert text.count("| many_instances 2 |") == 1 and "loaded in 1.5 s" in text, text
    assert "7.5" not in text
