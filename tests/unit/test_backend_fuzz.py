# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The backend's frame handling under a fuzzer, a few seconds per target
(backend/tests/fuzz_*.cc, built with ASan and UBSan by `pip install .`;
`make fuzz` runs the same targets coverage-guided under libFuzzer):

- tritonpy_fuzz_protocol: every body decoder, METRIC included;
- tritonpy_fuzz_dispatch: the reader's handlers of a frame on a stand-in
  for tritonserver: arenas announced with forged descriptors
  (PeerArenas::Add), METRIC, RESPONSES with stub-arena and location-2
  outputs written as responses, the BLS input copy and BLS calls answered
  by the fake server;
- tritonpy_fuzz_execute: batches of Triton requests of any content read
  by BuildExecute into EXECUTE frames, decoded and compared with the
  requests;
- tritonpy_fuzz_sequence: whole conversations with a stub (batches,
  arenas announced and replaced, RESPONSES, EXECUTE_DONE) through one
  instance's BatchTable; every request released once, with one final
  response.

Each runs the golden frames, then mutations of them from the suite's fixed
fuzz seed (tests/fuzz_seed.py), which is in pytest's header, the test's id
and its failure message: a failure replays with the command it prints."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from fuzz_seed import SEED

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
BUILD = ROOT / "build" / "cmake"
FUZZ_SECONDS = float(os.environ.get("TRITONPY_FUZZ_SECONDS", "3"))
# However busy the machine: at least this many mutated inputs per target.
MIN_INPUTS = 4096


def fuzz(target: str, seed: int) -> tuple[int, dict[str, int]]:
    """Runs `target` from `seed`; returns the inputs run and its counters."""
    binary = BUILD / target
    assert binary.is_file(), f"{binary} was not built (pip install .)"
    command = [str(binary), str(GOLDEN), "--seconds", str(FUZZ_SECONDS)]
    command += ["--min-inputs", str(MIN_INPUTS), "--seed", str(seed)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=FUZZ_SECONDS + 600)
    replay = " ".join(command)
    assert out.returncode == 0, f"seed {seed}; replay: {replay}\n{out.stdout}{out.stderr[-4000:]}"
    m = re.search(r"(\d+) inputs \(([^)]*)\), \d+ corpus frames, seed (\d+): no fault", out.stdout)
    assert m, out.stdout
    assert int(m.group(3)) == seed, out.stdout
    counters = {name.strip(): int(n) for n, name in re.findall(r"(\d+) ([a-zA-Z -]+)", m.group(2))}
    return int(m.group(1)), counters


@pytest.mark.parametrize("seed", [SEED])
def test_cpp_frame_decoders_survive_mutated_golden_frames(seed: int) -> None:
    inputs, c = fuzz("tritonpy_fuzz_protocol", seed)
    # The mutations got past the header and into the body decoders.
    assert inputs >= MIN_INPUTS, (inputs, c)
    assert c["valid headers"] > inputs // 20, (inputs, c)
    assert c["bodies decoded"] > inputs // 100, (inputs, c)


@pytest.mark.parametrize("seed", [SEED])
def test_frame_handlers_survive_mutated_frames_and_forged_descriptors(seed: int) -> None:
    inputs, c = fuzz("tritonpy_fuzz_dispatch", seed)
    # Every part was reached: handlers that accepted a frame, arenas mapped
    # from forged descriptors, outputs resolved (both locations), BLS frames.
    assert inputs >= MIN_INPUTS, (inputs, c)
    assert c["frames handled"] > 0, (inputs, c)
    assert c["arenas added"] > 0, (inputs, c)
    assert c["outputs resolved"] > 0, (inputs, c)
    assert c["BLS frames handled"] > 0 and c["BLS responses"] > 0, (inputs, c)


@pytest.mark.parametrize("seed", [SEED])
def test_execute_frames_hold_what_the_requests_held(seed: int) -> None:
    inputs, c = fuzz("tritonpy_fuzz_execute", seed)
    # Batches were built and checked: requests sent and refused, inputs
    # inline and in arenas, bodies moved to the arena.
    assert inputs >= MIN_INPUTS, (inputs, c)
    assert c["requests sent"] > 0 and c["requests refused"] > 0, (inputs, c)
    assert c["inputs inline"] > 0 and c["inputs in arenas"] > 0, (inputs, c)
    assert c["bodies in arenas"] > 0, (inputs, c)


@pytest.mark.parametrize("seed", [SEED])
def test_conversations_release_every_request_once(seed: int) -> None:
    inputs, c = fuzz("tritonpy_fuzz_sequence", seed)
    # Frames were taken across batches, arenas were replaced, and some
    # conversations ended in a protocol violation.
    assert inputs >= MIN_INPUTS, (inputs, c)
    assert c["frames taken"] > inputs // 2, (inputs, c)
    assert c["arenas replaced"] > 0 and c["violations"] > 0, (inputs, c)
