# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# protocol_ref (the reference codec) lives beside the tests.
sys.path.insert(0, str(TESTS))


def pytest_report_header() -> str:
    from fuzz_seed import SEED

    return f"fuzz seed: {SEED} (TRITONPY_FUZZ_SEED=N to change)"
