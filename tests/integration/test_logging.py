# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""pb_utils.Logger through the real server: messages land in Triton's log
with the model's file and line, at their level, and Triton's log settings
(--log-verbose, --log-info, --log-warning, --log-error) decide what shows."""

from __future__ import annotations

import queue
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository, running


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
        srv.wait_log("mark-7f3 log-warning", timeout=60)
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


# ------------------------------------------------ Python's logging module


def serve_pylog(work: Path, args: list[str], tags: dict[str, str]) -> tuple[str, dict[str, int]]:
    """Serves pylog and pylog_own with ``args``, sends each model its tag
    (model -> tag), shuts the server down; returns the log and each
    model's line of its first logging call."""
    srv = TritonServer(build_repository(work / "repo", list(tags)), work, args=args)
    lines = {}
    try:
        srv.wait_ready()
        with httpclient.InferenceServerClient(srv.http_url, network_timeout=60) as c:
            for model, tag in tags.items():
                x = httpclient.InferInput("TAG", [1], "BYTES")
                x.set_data_from_numpy(np.array([tag.encode()], dtype=object))
                lines[model] = int(c.infer(model, [x]).as_numpy("LINE")[0])
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]
    return srv.log(), lines


def triton_entry(log: str, text: str) -> str | None:
    """Triton's log line whose quoted message ends with ``text``."""
    for ln in log.splitlines():
        if ln.endswith(f'{text}"') and '] "' in ln:
            return ln
    return None


def test_python_logging_goes_to_tritons_log_unless_the_model_configured_it(
    tmp_path: Path,
) -> None:
    log, lines = serve_pylog(tmp_path, [], {"pylog": "mark-p1", "pylog_own": "mark-p2"})
    line = lines["pylog"]
    who = "model 'pylog' instance 'pylog_0_0'"
    expect = {
        "warning": ("W", f"{who}: 1.model: mark-p1 warning", line),
        "error": ("E", f"{who}: 1.model: mark-p1 error", line + 1),
        "chatty-info": ("I", f"{who}: pylog.chatty: mark-p1 chatty-info", line + 3),
    }
    for what, (level, text, lineno) in expect.items():
        got = triton_entry(log, text)
        assert got is not None, (what, log[-4000:])
        assert got.startswith(level), got
        assert re.search(rf"\bmodel\.py:{lineno}\] ", got), got
    # logger.exception: the message, then the traceback, in one entry.
    assert f"{who}: 1.model: mark-p1 exception" in log and "KeyError: 'boom'" in log
    assert "quiet-info" not in log and "quiet-debug" not in log
    # At import (the auto-complete stub imports the file) too.
    imported = triton_entry(log, "1.model: 1.model model imported")
    assert imported is not None and imported.startswith("W"), log[-4000:]
    # The model that called logging.basicConfig keeps its own format, on
    # its stderr, and nothing of it is routed.
    assert "OWN-FORMAT WARNING mark-p2 warning" in log, log[-4000:]
    assert "pylog_own_0_0': 1.model: mark-p2" not in log


def test_stub_python_logging_false_leaves_it_on_stderr(tmp_path: Path) -> None:
    log, _ = serve_pylog(
        tmp_path, ["--backend-config=tritonpy,stub-python-logging=false"], {"pylog": "mark-p3"}
    )
    # Python's last resort writes the bare message, from the import on.
    assert re.search(r"^mark-p3 warning$", log, re.M), log[-4000:]
    assert re.search(r"^1\.model model imported$", log, re.M), log[-4000:]
    assert "1.model: mark-p3" not in log and "1.model: 1.model model imported" not in log
    assert "stub-python-logging=false" in log  # the backend's settings line names it


# ------------------------------------------------ every phase, settings changed live

PHASE_LEVELS = ("log", "info", "warning", "error", "verbose", "print")


def phase_counts(log: str) -> dict[str, dict[str, int]]:
    """How often each "log_phases <phase> <level>" line is in ``log``. The
    levels are spelled out: a print() of the stub and a line of the server
    may share a line of the file (two processes write it)."""
    counts = {p: dict.fromkeys(PHASE_LEVELS, 0) for p in ("initialize", "execute", "finalize")}
    pattern = r"log_phases (initialize|execute|finalize) (" + "|".join(PHASE_LEVELS) + ")"
    for found in re.finditer(pattern, log):
        counts[found[1]][found[2]] += 1
    return counts


def expected(*, initialize: set[str], execute: set[str], finalize: set[str]) -> dict:
    shown = {"initialize": initialize, "execute": execute, "finalize": finalize}
    return {p: {lv: int(lv in shown[p]) for lv in PHASE_LEVELS} for p in shown}


def serve_phases(work: Path, settings: dict[str, object] | None) -> str:
    """Serves log_phases, applies ``settings`` through the logging endpoint
    once it is loaded, runs one request, shuts the server down; returns its
    log."""
    srv = TritonServer(build_repository(work / "repo", ["log_phases"]), work)
    try:
        srv.wait_ready()
        with httpclient.InferenceServerClient(srv.http_url, network_timeout=60) as c:
            if settings is not None:
                c.update_log_settings(settings)
            x = httpclient.InferInput("IN", [1], "FP32")
            x.set_data_from_numpy(np.array([1.0], np.float32))
            assert c.infer("log_phases", [x]).as_numpy("OUT")[0] == 1.0
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]
    return srv.log()


NON_VERBOSE = {"log", "info", "warning", "error", "print"}


def test_finalize_logs_reach_the_log_on_shutdown(tmp_path: Path) -> None:
    log = serve_phases(tmp_path, None)
    want = expected(initialize=NON_VERBOSE, execute=NON_VERBOSE, finalize=NON_VERBOSE)
    assert phase_counts(log) == want, log[-3000:]


def test_finalize_logs_reach_the_log_on_unload(tmp_path: Path) -> None:
    srv = TritonServer(
        build_repository(tmp_path / "repo", ["log_phases"]),
        tmp_path,
        args=["--model-control-mode=explicit", "--load-model=log_phases"],
    )
    try:
        srv.wait_ready()
        with httpclient.InferenceServerClient(srv.http_url, network_timeout=60) as c:
            c.unload_model("log_phases")
        deadline = time.monotonic() + 30
        while srv.model_ready("log_phases") or "unloaded 'log_phases'" not in srv.log():
            assert time.monotonic() < deadline, srv.log()[-3000:]
            time.sleep(0.05)
        counts = phase_counts(srv.log())["finalize"]
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]
    assert counts == {lv: int(lv in NON_VERBOSE) for lv in PHASE_LEVELS}, srv.log()[-3000:]


def test_verbose_switched_on_through_the_logging_endpoint(tmp_path: Path) -> None:
    log = serve_phases(tmp_path, {"log_verbose_level": 1})
    everything = NON_VERBOSE | {"verbose"}
    want = expected(initialize=NON_VERBOSE, execute=everything, finalize=everything)
    assert phase_counts(log) == want, log[-3000:]


def test_levels_switched_off_through_the_logging_endpoint(tmp_path: Path) -> None:
    log = serve_phases(tmp_path, {"log_info": False, "log_warning": False, "log_error": False})
    # print() is not Triton's log: it stays.
    want = expected(initialize=NON_VERBOSE, execute={"print"}, finalize={"print"})
    assert phase_counts(log) == want, log[-3000:]


# ------------------------------------------------ an exception of execute()


def decoupled_copy(repo: Path, name: str) -> str:
    """A decoupled copy of the model ``name`` in ``repo``; returns its name."""
    copy = f"{name}_decoupled"
    shutil.copytree(repo / name, repo / copy)
    config = (repo / copy / "config.pbtxt").read_text().replace(f'"{name}"', f'"{copy}"')
    (repo / copy / "config.pbtxt").write_text(
        config + "model_transaction_policy { decoupled: true }\n"
    )
    return copy


@pytest.fixture(scope="module")
def raising_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("raising")
    repo = build_repository(work / "repo", ["raise_sync", "raise_async"])
    for name in ("raise_sync", "raise_async"):
        decoupled_copy(repo, name)
    with running(TritonServer(repo, work)) as srv:
        yield srv


def infer_error(srv: TritonServer, model: str) -> str:
    """The error one request to ``model`` gets (a gRPC stream for a
    decoupled model)."""
    x = np.array([1.0], np.float32)
    if not model.endswith("_decoupled"):
        with httpclient.InferenceServerClient(srv.http_url, network_timeout=60) as c:
            inp = httpclient.InferInput("IN", [1], "FP32")
            inp.set_data_from_numpy(x)
            with pytest.raises(InferenceServerException) as e:
                c.infer(model, [inp])
            return str(e.value)
    answers: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        inp = grpcclient.InferInput("IN", [1], "FP32")
        inp.set_data_from_numpy(x)
        c.start_stream(callback=lambda result, error: answers.put(error))
        try:
            c.async_stream_infer(model, [inp])
            error = answers.get(timeout=60)
        finally:
            c.stop_stream()
    assert error is not None
    return str(error)


@pytest.mark.parametrize(
    "model", ["raise_sync", "raise_async", "raise_sync_decoupled", "raise_async_decoupled"]
)
def test_execute_exception_is_logged_with_its_traceback(
    raising_server: TritonServer, model: str
) -> None:
    kind = "async" if "async" in model else "sync"
    refusal = f"ValueError: execute refused on purpose ({kind})"
    assert refusal in infer_error(raising_server, model)
    # The model instance's name, as the official backend logs it.
    head = f"Failed to process the request(s) for model '{model}_0_0', message: {refusal}"
    deadline = time.monotonic() + 30
    while (
        line := next((ln for ln in raising_server.log().splitlines() if head in ln), None)
    ) is None:
        assert time.monotonic() < deadline, raising_server.log()[-3000:]
        time.sleep(0.05)
    # Triton writes the message on one line, newlines escaped.
    assert line.startswith("E"), line
    assert "Traceback (most recent call last)" in line and "in refuse" in line, line
