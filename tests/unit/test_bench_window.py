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
