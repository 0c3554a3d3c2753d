# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server import TritonServer, build_repository, running  # noqa: E402

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
    args = ["--model-control-mode=explicit", *(f"--load-model={m}" for m in START_MODELS)]
    with running(TritonServer(repo, work, args=args)) as srv:
        yield srv
