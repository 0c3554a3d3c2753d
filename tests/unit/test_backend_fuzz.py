# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The backend's frame decoder under a fuzzer: tritonpy_fuzz_protocol
(backend/tests/fuzz_protocol.cc, built with ASan and UBSan) runs the golden
frames and random mutations of them for a few seconds. Any read outside a
message or an arena aborts it."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
FUZZ_SECONDS = float(os.environ.get("TRITONPY_FUZZ_SECONDS", "4"))


def test_cpp_frame_decoder_survives_mutated_golden_frames() -> None:
    binary = ROOT / "build" / "cmake" / "tritonpy_fuzz_protocol"
    assert binary.is_file(), f"{binary} was not built (pip install .)"
    seed = time.time_ns() % (1 << 32)  # a new corner each run; printed to replay it
    out = subprocess.run(
        [str(binary), str(GOLDEN), "--seconds", str(FUZZ_SECONDS), "--seed", str(seed)],
        capture_output=True,
        text=True,
        timeout=FUZZ_SECONDS + 120,
    )
    print(out.stdout)
    assert out.returncode == 0, f"seed {seed}:\n{out.stdout}{out.stderr[-4000:]}"
    m = re.search(r"(\d+) inputs \((\d+) valid headers, (\d+) bodies decoded\)", out.stdout)
    assert m, out.stdout
    inputs, headers, bodies = map(int, m.groups())
    # The mutations got past the header and into the body decoders.
    assert inputs > 1000 and headers > inputs // 20 and bodies > inputs // 100, out.stdout
