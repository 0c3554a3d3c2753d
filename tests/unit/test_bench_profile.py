# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bench/profile.py's gRPC runs: the load generator's arguments are ones
bench/grpc_load.cc accepts for every model the profile offers."""

import os
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


def test_a_thread_is_read_with_its_cpu_changes(tmp_path):
    threads = profile._threads(os.getpid())
    assert threads, "no thread of this process read"
    for name, ticks, voluntary, involuntary, moved in threads.values():
        assert name and ticks >= 0 and voluntary >= 0 and involuntary >= 0 and moved >= 0
    (tmp_path / "sched").write_text("se.vruntime : 1.5\nse.nr_migrations :   42\n")
    assert profile._migrations(str(tmp_path)) == 42
    (tmp_path / "sched").write_text("no such line\n")
    assert profile._migrations(str(tmp_path)) == 0
    assert profile._migrations(str(tmp_path / "gone")) == 0
