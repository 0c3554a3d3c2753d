# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The seed of every fuzz test in the suite (tests/unit/test_*_fuzz.py):
fixed, so that a failure replays, and printed in the header of every pytest
run. TRITONPY_FUZZ_SEED=N runs from another seed."""

from __future__ import annotations

import os

SEED = int(os.environ.get("TRITONPY_FUZZ_SEED", "20260523"))
