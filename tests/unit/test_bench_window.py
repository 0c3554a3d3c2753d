# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The benchmark's measurement window: a load generator that was not
ready when the window opened (a busy machine starts Python slowly) gets
the window run again with a longer spin-up, instead of a result that
measured part of the window or nothing ("no successful request")."""

import json
import subprocess
import sys
import textwrap
import time

from bench import loads

# A load generator that joins the first window late and the next in time;
# it takes the window's arguments and prints what the real ones print.
WORKER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    marker = Path(sys.argv[1])
    late = not marker.exists()
    marker.write_text("seen")
    print(json.dumps({"ok": 0 if late else 5, "joined_late": late}))
    """
)


class _NoServer:
    def cpu_seconds(self) -> float:
        return 0.0


def test_a_window_joined_late_runs_again_with_twice_the_spinup(tmp_path):
    marker = tmp_path / "first"
    command = [sys.executable, "-c", WORKER, str(marker)]
    opened: list[str] = []
    window = loads.Window(1, 1, 1, 0.05, 0.0, 0.05)
    outs, counts = loads._window_workers(_NoServer(), command, window, opened.append)
    assert opened == ["start", "end", "start", "end"]
    assert counts["ok"] == 5 and not outs[0]["joined_late"]


def test_a_real_load_generator_says_whether_it_joined_late(tmp_path):
    start = time.time() - 10  # a window that opened before the process did
    argv = [sys.executable, "-m", "bench.sse_load", "--target", "127.0.0.1:9", "--model", "m"]
    argv += loads.window_argv(1, 1, start, start + 0.01)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout)["joined_late"] is True


def test_a_client_process_near_a_full_core_is_saturated_whatever_the_machine():
    # one process at 0.95 of a core, the other idle, no server CPU at all
    outs = [{"client_cpu_s": 2.85, "lag_p90_us": 300.0}, {"client_cpu_s": 0.1}]
    assert loads._window_counts(outs, 3.0, 0.0)["client_saturated"] is True


def test_a_client_whose_timer_wakes_late_is_saturated_at_a_third_of_a_core():
    outs = [{"client_cpu_s": 0.9, "lag_p90_us": 400.0}, {"client_cpu_s": 0.9, "lag_p90_us": 15e3}]
    assert loads._window_counts(outs, 3.0, 0.0)["client_saturated"] is True


def test_two_processes_at_half_a_core_each_and_on_time_are_not_saturated():
    # together about one core (client_cores), but neither process is behind
    outs = [{"client_cpu_s": 1.45, "lag_p90_us": 400.0}, {"client_cpu_s": 1.45, "lag_p90_us": 500}]
    counts = loads._window_counts(outs, 3.0, 3.0)
    assert counts["client_saturated"] is False
    assert round(counts["client_cores"], 2) == 0.97 and counts["client_lag_p90_us"] == 500
