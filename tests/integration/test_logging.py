# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""pb_utils.Logger through the real server: messages land in Triton's log
with the model's file and line, at their level, and Triton's log settings
(--log-verbose, --log-info, --log-warning, --log-error) decide what shows."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from server import TritonServer, build_repository


def run(work: Path, args: list[str]) -> tuple[str, int]:
    """Serves the logging model with ``args``; returns the server's log
    after one request tagged with a fresh marker, and the model's line."""
    srv = TritonServer(build_repository(work / "repo", ["logging"]), work, args=args)
    try:
        srv.wait_ready()
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=60)
        try:
            tag = httpclient.InferInput("TAG", [1], "BYTES")
            tag.set_data_from_numpy(np.array([b"mark-7f3"], dtype=object))
            line = int(c.infer("logging", [tag]).as_numpy("LINE")[0])
        finally:
            c.close()
        # The messages travel before the response, the server writes them
        # from its reader thread: give it a moment.
        deadline = time.monotonic() + 10
        while "mark-7f3 log-warning" not in srv.log() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]
    return srv.log(), line


def entry(log: str, text: str) -> str | None:
    """The log line carrying ``text`` (None if absent); Triton quotes
    messages."""
    for ln in log.splitlines():
        if ln.endswith(f'] "{text}"'):
            return ln
    return None


def test_levels_files_and_lines(tmp_path: Path) -> None:
    log, line = run(tmp_path, ["--log-verbose=0"])
    expect = {
        "info": ("I", line),
        "warn": ("W", line + 1),
        "error": ("E", line + 2),
        "log-error": ("E", line + 4),
        "log-info": ("I", line + 5),
        "log-warning": ("W", line + 6),
    }
    for what, (level, lineno) in expect.items():
        got = entry(log, f"mark-7f3 {what}")
        assert got is not None, (what, log[-3000:])
        assert got.startswith(level), got
        assert re.search(rf"\bmodel\.py:{lineno}\] ", got), got
    assert entry(log, "mark-7f3 verbose") is None
    assert entry(log, "logging model: initialize") is not None


def test_verbose_shows_with_log_verbose(tmp_path: Path) -> None:
    log, line = run(tmp_path, ["--log-verbose=1"])
    got = entry(log, "mark-7f3 verbose")
    assert got is not None and got.startswith("I"), log[-3000:]
    assert re.search(rf"\bmodel\.py:{line + 3}\] ", got), got


@pytest.mark.parametrize("off", ["info", "warning", "error"])
def test_disabled_levels_stay_out(tmp_path: Path, off: str) -> None:
    log, _ = run(tmp_path, [f"--log-{off}=false"])
    shown = {
        what: entry(log, f"mark-7f3 {what}") is not None
        for what in ("info", "warn", "error", "log-info", "log-warning", "log-error")
    }
    levels = {
        "info": "info",
        "log-info": "info",
        "warn": "warning",
        "log-warning": "warning",
        "error": "error",
        "log-error": "error",
    }
    assert shown == {what: levels[what] != off for what in shown}, shown
