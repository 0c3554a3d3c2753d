# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A failed scenario's reason goes into the published result files, so it
must not name the folders of the machine that ran the bench, and it names
a work file (in bench's work folder) as ``<work>/name`` whatever form its path has
(tests/unit/test_bench_separate.py: so does every other text of a
published result file or page)."""

import json
import os
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
if str(CHECKOUT) not in sys.path:
    sys.path.append(str(CHECKOUT))  # bench/
import pytest  # noqa: E402

from bench import paths  # noqa: E402
from bench.run import failure_reason  # noqa: E402

WORK = CHECKOUT / "bench" / "work"
IN_WORK = "bench/work"  # the work folder, relative to a checkout
CSV = "perf_analyzer-add_sub-c64.csv"
PUBLISHED = CHECKOUT / "docs" / "benchmarks"


def test_paths_inside_the_checkout_become_relative() -> None:
    tool = CHECKOUT / ".venv-genai" / "bin" / "perf_analyzer"
    out = CHECKOUT / "bench" / "results" / "pa.csv"
    reason = failure_reason(f"TimeoutExpired: Command '['{tool}', '-f', '{out}']'")
    assert str(CHECKOUT) not in reason
    assert "'.venv-genai/bin/perf_analyzer'" in reason
    assert "'bench/results/pa.csv'" in reason


def test_other_paths_and_the_length_cap(tmp_path: Path) -> None:
    other = tmp_path / "x"  # neither the checkout, its work folder nor home
    assert failure_reason(f"no such file: {other}") == f"no such file: {other}"
    assert len(failure_reason("x" * 1000)) == 400


def test_perf_analyzer_timeout_names_its_work_file() -> None:
    tool = CHECKOUT / ".venv-genai" / "bin" / "perf_analyzer"
    text = (
        f"TimeoutExpired: Command '['{tool}', '-m', 'add_sub', '-u', '127.0.0.1:47625', "
        f"'-f', '{WORK / CSV}']' timed out after 300 seconds"
    )
    assert failure_reason(text) == (
        "TimeoutExpired: Command '['.venv-genai/bin/perf_analyzer', '-m', 'add_sub', "
        f"'-u', '127.0.0.1:47625', '-f', '<work>/{CSV}']' timed out after 300 seconds"
    )


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout in another folder, as bench/run.py would see it there."""
    checkout = tmp_path / "co"
    (checkout / "bench" / "work" / "genai-perf").mkdir(parents=True)
    monkeypatch.setattr(paths, "_CHECKOUT", checkout)
    monkeypatch.setattr(paths, "_WORK", checkout / "bench" / "work")
    return checkout


@pytest.mark.parametrize("cwd", [".", "bench", f"{IN_WORK}/genai-perf", ".."])
def test_every_form_of_a_work_path(cwd: str, elsewhere: Path, monkeypatch) -> None:
    here = elsewhere / cwd
    monkeypatch.chdir(here)
    work = elsewhere / "bench" / "work"
    (elsewhere / "link").symlink_to(work)
    forms = [
        str(work / CSV),  # absolute
        f"{IN_WORK}/{CSV}",  # relative to the checkout
        os.path.relpath(work / CSV, here),  # relative to the current folder
        f"{elsewhere}/link/{CSV}",  # through a link
        str(elsewhere.parent / "another" / "bench" / "work" / CSV),  # another checkout's
        f"../checkout/{IN_WORK}/{CSV}",
    ]
    for form in forms:
        for text in (form, f"no such file: {form}", f"'-f', '{form}']", f"out={form}, rc 1"):
            got = failure_reason(text)
            assert got == text.replace(form, f"<work>/{CSV}"), (form, got)
    deep = work / "genai-perf" / "c1" / "x_genai_perf.json"
    assert failure_reason(f"read {deep}:") == "read <work>/genai-perf/c1/x_genai_perf.json:"
    assert failure_reason(f"in {work}") == "in <work>"
    assert failure_reason(f"{elsewhere}/.venv/bin/python") == ".venv/bin/python"


def test_no_machine_path_is_left() -> None:
    home = Path.home()
    text = (
        f"{CHECKOUT}/{IN_WORK}/{CSV} {CHECKOUT}/.venv/bin/python {home}/.cache/x "
        f"{os.path.realpath(WORK)}/a.log"
    )
    got = failure_reason(text)
    assert str(CHECKOUT) not in got and "bench/work" not in got
    if home != Path("/"):
        assert str(home) + "/" not in got
    assert got.split() == [f"<work>/{CSV}", ".venv/bin/python", "~/.cache/x", "<work>/a.log"]


def test_what_is_no_machine_path_stays() -> None:
    for text in (
        "HTTP 400: POST /v2/models/add_sub/infer failed",
        "http://127.0.0.1:8000/v2/models/x/ready",
        "got 1/2 of the responses in 3.0 s",
        "bench/workers/x is not a work file, nor is work",
    ):
        assert failure_reason(text) == text


def _reasons(value: object) -> list[str]:
    if isinstance(value, dict):
        found = [v for k, v in value.items() if k == "reason" and isinstance(v, str)]
        return found + [r for v in value.values() for r in _reasons(v)]
    if isinstance(value, list):
        return [r for v in value for r in _reasons(v)]
    return []


@pytest.mark.parametrize("name", sorted(p.name for p in PUBLISHED.glob("*.json")))
def test_published_reasons_are_as_failure_reason_writes_them(name: str) -> None:
    reasons = _reasons(json.loads((PUBLISHED / name).read_text()))
    for reason in reasons:
        assert f"{IN_WORK}/" not in reason, reason
        assert failure_reason(reason) == reason, reason
