# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Hostile test models import tests/hostile.py from here (servers inherit it).
os.environ["TRITONPY_TESTS_DIR"] = str(Path(__file__).resolve().parents[1])

from server import TritonServer, build_repository, explicit, official_server, running  # noqa: E402

# Models the shared server loads at start; tests load others explicitly.
SHARED_MODELS = [
    "add_sub",
    "add_sub_python",
    "identity",
    "batched",
    "errors",
    "multifile",
    "custom_filename",
    "shapes",
    "init_fail",
]
START_MODELS = [m for m in SHARED_MODELS if m != "init_fail"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Says which Pythons test_pythons.py ran the stub on, and which it
    could not (also without -s: visible in `make test`)."""
    if "pythons" not in sys.modules:  # test_pythons.py was not collected
        return
    import pythons

    outcomes: dict[str, str] = {}  # by version; a failure in any phase wins
    for outcome in ("failed", "error", "skipped", "passed"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if "test_pythons.py::" in nodeid and (outcome != "passed" or report.when == "call"):
                outcomes.setdefault(nodeid.rsplit("[", 1)[-1].rstrip("]"), outcome)
    terminalreporter.write_line(pythons.summary(outcomes))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("server")
    repo = build_repository(work / "repo", SHARED_MODELS)
    args = explicit(START_MODELS)
    with running(TritonServer(repo, work, args=args)) as srv:
        yield srv


# The examples (and test models) the official backend serves for the
# differential tests; gpu_instance is loaded by its test (and refused).
OFFICIAL_MODELS = [
    "add_sub",
    "square",
    "auto_complete_batch",
    "auto_complete_nobatch",
    "bls",
    "bls_async",
    "custom_metrics",
    "instance_kind",
    "preprocessing",
    "iris_preprocess",
    "iris_classify",
    "render",
]


@pytest.fixture(scope="session")
def official_examples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """One tritonserver with the official Python backend for every
    differential test (a start costs seconds): OFFICIAL_MODELS loaded, as
    they are but for `backend: "python"`, and gpu_instance loadable."""
    work = tmp_path_factory.mktemp("official-examples")
    repo = build_repository(work / "repo", [*OFFICIAL_MODELS, "gpu_instance"])
    for config in repo.glob("*/config.pbtxt"):
        config.write_text(config.read_text().replace('backend: "tritonpy"', 'backend: "python"'))
    args = explicit(OFFICIAL_MODELS)
    srv = official_server(work, [], args)  # serves work/repo as it is
    try:
        srv.wait_ready(timeout=180)
        yield srv
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]
