# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The docs stay true to the code: every public name of the model API is in
docs/api.md, every backend setting and model parameter the backend parses
is in docs/configuration.md, and relative links between the docs resolve."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from tritonpy import pb_utils

ROOT = Path(__file__).resolve().parents[2]
API = (ROOT / "docs" / "api.md").read_text()
CONFIG = (ROOT / "docs" / "configuration.md").read_text()


def documented(name: str) -> bool:
    return re.search(rf"`(?:await )?(?:\w+\.)?{re.escape(name)}[`(\s:=]", API) is not None


@pytest.mark.parametrize("name", pb_utils.__all__)
def test_every_public_name_is_documented(name: str) -> None:
    assert documented(name), f"docs/api.md does not document pb_utils.{name}"


@pytest.mark.parametrize(
    "cls",
    [
        "Tensor",
        "InferenceRequest",
        "InferenceResponse",
        "InferenceResponseSender",
        "ResponseIterator",
        "TritonError",
        "Logger",
        "InferenceTrace",
        "ModelConfig",
    ],
)
def test_every_public_method_is_documented(cls: str) -> None:
    methods = [
        n
        for n, _ in inspect.getmembers(getattr(pb_utils, cls), callable)
        if not n.startswith("_") and n not in ("mro",)
    ]
    assert methods
    missing = [m for m in methods if not documented(m)]
    assert not missing, f"docs/api.md does not document {cls}.{missing}"


def test_every_backend_setting_is_documented() -> None:
    source = (ROOT / "backend" / "src" / "model" / "backend_state.cc").read_text()
    keys = set(re.findall(r'key == "([a-z-]+)"', source))
    keys |= set(
        re.findall(r'"([a-z]+(?:-[a-z]+)+)"', source.split("namespace {")[1].split("Trim(")[0])
    )
    keys |= set(re.findall(r'\{"([a-z]+(?:-[a-z]+)+)",', source))  # key tables
    assert {"python-executable", "arena-byte-size", "shm-region-prefix-name"} <= keys
    assert "stub-max-body-bytes" in keys
    missing = sorted(k for k in keys if f"`{k}`" not in CONFIG)
    assert not missing, f"docs/configuration.md does not list {missing}"


def test_every_model_parameter_is_documented() -> None:
    source = (ROOT / "backend" / "src" / "model" / "model_state.cc").read_text()
    params = set(re.findall(r'params->Find\("([a-z_]+)"\)', source))
    params |= set(re.findall(r'Parameter\(params, "([a-z_]+)"', source))
    # The sandbox's parameters are in backend_state.cc's kSandboxKeys.
    sandbox = (ROOT / "backend" / "src" / "model" / "backend_state.cc").read_text()
    params |= set(re.findall(r'\{"[a-z-]+",\s*"([a-z_]+)",', sandbox))
    assert "stub_sandbox_max_processes" in params
    assert "max_inflight_batches" in params
    missing = sorted(p for p in params if f"`{p}`" not in CONFIG)
    assert not missing, f"docs/configuration.md does not list {missing}"


def test_default_values_match_the_backend() -> None:
    header = (ROOT / "backend" / "src" / "model" / "backend_state.h").read_text()
    timeout = re.search(r"stub_timeout_seconds = (\d+);", header)
    assert timeout is not None
    assert f"| `stub-timeout-seconds` | {timeout.group(1)} |" in CONFIG
    model = (ROOT / "backend" / "src" / "model" / "model_state.h").read_text()
    inflight = re.search(r"kDefaultMaxInflightBatches = (\d+);", model)
    assert inflight is not None
    decoupled = re.search(r"kDecoupledMaxInflightBatches = (\d+);", model)
    assert decoupled is not None
    assert (
        f"| `max_inflight_batches` | {inflight.group(1)}; "
        f"{decoupled.group(1)} for a decoupled model |" in CONFIG
    )


def test_relative_links_resolve() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            # docs/reliability.md is the reliability work's page: linked from
            # the index ahead of it.
            if page.name == "index.md" and target == "reliability.md":
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_every_environment_variable_is_documented() -> None:
    sources = [ROOT / "setup.py", *(ROOT / "src").rglob("*.py"), *(ROOT / "src").rglob("*.pyx")]
    sources += [*(ROOT / "backend" / "src").rglob("*.cc")]
    names = set()
    for path in sources:
        names |= set(re.findall(r'"(TRITONPY_[A-Z_]+)"', path.read_text()))
    assert {"TRITONPY_DEBUG", "TRITONPY_STUB_ONLY", "TRITONPY_CMAKE_ARGS"} <= names
    table = CONFIG.split("## Environment", 1)[1].split("\n\n", 2)[1]
    missing = sorted(n for n in names if f"| `{n}` |" not in table)
    assert not missing, f"docs/configuration.md (Environment) does not list {missing}"


def test_every_example_is_in_the_readme_list() -> None:
    readme = (ROOT / "README.md").read_text()
    listing = readme.split("`examples/` has one folder per capability", 1)[1].split("\n\n", 1)[0]
    examples = [
        p.name for p in (ROOT / "examples").iterdir() if p.is_dir() and p.name != "model_repository"
    ]
    assert {"add_sub", "custom_metrics", "repeat"} <= set(examples)
    missing = sorted(e for e in examples if not re.search(rf"\b{e}\b", listing))
    assert not missing, f"README's list of examples does not name {missing}"
