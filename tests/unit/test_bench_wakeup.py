# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bench/wakeup.py: two real processes wake each other over a socket pair,
on the CPUs asked for, and the report says what it measured."""

import copy
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench/
from bench import report, wakeup  # noqa: E402


def test_round_trips_are_measured_on_every_cpu_this_process_may_use():
    before = os.sched_getaffinity(0)
    m = wakeup.measure(round_trips=200)
    assert m["same_cpu_us"] > 0
    if len(before) > 1:
        assert m["other_cpu_us"] > 0
    else:
        assert "other_cpu_us" not in m
    assert os.sched_getaffinity(0) == before, "the caller's CPUs were not given back"


def test_the_run_line_names_the_wakeups_only_when_they_were_measured():
    doc = {
        "date": "2026-01-01 00:00 UTC",
        "machine": {"cpu": "a CPU", "cores": 2, "memory_gib": 1.0, "kernel": "6"},
        "config": {"duration": 3.0, "warmup": 1.0},
        "rounds": 1,
        "elapsed_s": 60,
        "systems": ["tritonpy"],
        "scenarios": [],
    }
    assert "bench.wakeup" not in report.markdown(doc)
    measured = copy.deepcopy(doc)
    measured["machine"]["wakeup_round_trip_us"] = {"other_cpu_us": 75.4, "same_cpu_us": 5.2}
    text = report.markdown(measured)
    assert "takes 75 us across CPUs and 5 us on one (`python -m bench.wakeup`)" in text
