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
