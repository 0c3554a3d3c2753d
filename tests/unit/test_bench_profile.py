# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bench/profile.py's gRPC runs: the load generator's arguments are ones
bench/grpc_load.cc accepts for every model the profile offers."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench/
from bench import profile  # noqa: E402


def test_every_model_gets_a_token_count_the_grpc_client_accepts():
    for model in [*profile.BODIES, *profile.STREAMED]:
        tokens = profile.grpc_tokens(model)
        assert tokens >= 1, model
        if model in profile.STREAMED:
            assert tokens == profile.STREAMED[model]
