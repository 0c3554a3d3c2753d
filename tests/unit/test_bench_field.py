# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The field's load generators in the suite (bench/field.py): the page
shows the commands the suite runs, and the llm example and the engine
model declare the inputs genai-perf sends for --backend vllm."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench/
from bench import field, published, report  # noqa: E402
from bench.models import MODELS  # noqa: E402
from bench.scenarios import Config, build  # noqa: E402

# What genai-perf 0.0.8 sends for --service-kind triton --backend vllm
# (genai_perf/inputs/converters/vllm_converter.py): the prompt, the
# stream flag with --streaming, exclude_input_in_output, and
# sampling_parameters with --output-tokens-mean.
VLLM_INPUTS = {"text_input", "stream", "exclude_input_in_output", "sampling_parameters"}


def declared_inputs(config: str) -> set[str]:
    block = config[config.index("input [") : config.index("output [")]
    return set(re.findall(r'name: "(\w+)"', block))


def test_the_page_shows_the_commands_the_suite_runs() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert report.field_section(published.load()) in page


def test_commands_cover_closed_and_open_loop() -> None:
    commands = field.example_commands(Config())
    pa = [c for c in commands if c.startswith("perf_analyzer ")]
    genai = [c for c in commands if c.startswith("genai-perf ")]
    assert any("--concurrency-range" in c for c in pa)
    assert any("--request-rate-range" in c for c in pa)
    assert any("--concurrency " in c for c in genai)
    assert any("--request-rate " in c for c in genai)
    assert all("--backend vllm --streaming" in c for c in genai)
    # no machine paths in what the page shows
    assert not any(w.startswith("/") for c in commands for w in c.split())


def test_scenarios_run_both_loops() -> None:
    ids = [s.id for s in build(Config())]
    for prefix in ("pa_add_sub_c", "pa_add_sub_r", "genai_llm_c", "genai_llm_r", "genai_engine_c1"):
        assert any(i.startswith(prefix) for i in ids), prefix
    assert any(i.startswith("sse_stream_async_r") for i in ids)


@pytest.mark.parametrize("model", ["llm", "engine"])
def test_models_take_what_genai_perf_sends(model: str) -> None:
    if model == "llm":
        config = (ROOT / "examples" / "llm" / "config.pbtxt").read_text()
    else:
        config = MODELS[model][1]
    assert declared_inputs(config) >= VLLM_INPUTS
    # every other input may be left out
    for line in config[config.index("input [") : config.index("output [")].splitlines():
        name = re.search(r'name: "(\w+)"', line)
        if name and name.group(1) != "text_input":
            assert "optional: true" in line, line
