# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A failed scenario's reason goes into the published result files, so it
must not name the folders of the machine that ran the bench."""

import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
if str(CHECKOUT) not in sys.path:
    sys.path.append(str(CHECKOUT))  # bench/
from bench.run import failure_reason  # noqa: E402


def test_paths_inside_the_checkout_become_relative() -> None:
    tool = CHECKOUT / ".venv-genai" / "bin" / "perf_analyzer"
    out = CHECKOUT / "bench" / "results" / "pa.csv"
    reason = failure_reason(f"TimeoutExpired: Command '['{tool}', '-f', '{out}']'")
    assert str(CHECKOUT) not in reason
    assert "'.venv-genai/bin/perf_analyzer'" in reason
    assert "'bench/results/pa.csv'" in reason


def test_other_paths_and_the_length_cap() -> None:
    assert failure_reason("no such file: /opt/x") == "no such file: /opt/x"
    assert len(failure_reason("x" * 1000)) == 400
