# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A model's instances start in parallel, as the official backend's do
(Triton's parallel instance loading), at most instance-start-parallelism
of them at once. The start_together model loads only if `together` of its
4 instances run initialize() at the same time."""

from __future__ import annotations

from pathlib import Path

import tritonclient.http as httpclient

from server import TritonServer, build_repository, load_failure, running


def _repository(work: Path, together: int, wait_seconds: int) -> Path:
    repo = build_repository(work / "repo", ["start_together"])
    config = repo / "start_together" / "config.pbtxt"
    text = config.read_text()
    text = text.replace('string_value: "4"', f'string_value: "{together}"')
    text = text.replace('string_value: "120"', f'string_value: "{wait_seconds}"')
    config.write_text(text)
    return repo


def _serve(work: Path, together: int, wait_seconds: int, *args: str) -> TritonServer:
    return TritonServer(
        _repository(work, together, wait_seconds),
        work,
        args=["--model-control-mode=explicit", *args],
    )


def _load(srv: TritonServer, model: str) -> None:
    # Longer than the model's own wait: its error, not the client's timeout.
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=300)
    try:
        c.load_model(model)
    finally:
        c.close()


def test_all_instances_start_together_by_default(tmp_path: Path) -> None:
    with running(_serve(tmp_path, together=4, wait_seconds=60)) as srv:
        _load(srv, "start_together")  # serial starts would each wait in vain
        assert srv.model_ready("start_together")
        started = sorted(p.name for p in (srv.repo / "start_together" / "started").iterdir())
        assert started == [f"start_together_0_{i}" for i in range(4)], started


def test_the_bound_lets_two_start_together(tmp_path: Path) -> None:
    args = "--backend-config=tritonpy,instance-start-parallelism=2"
    with running(_serve(tmp_path, 2, 60, args)) as srv:
        _load(srv, "start_together")  # in two pairs
        assert srv.model_ready("start_together")


def test_the_bound_keeps_a_third_from_starting(tmp_path: Path) -> None:
    args = "--backend-config=tritonpy,instance-start-parallelism=2"
    with running(_serve(tmp_path, 3, 3, args)) as srv:
        error = load_failure(srv, "start_together")
        # The two that hold the turns see each other, never a third.
        assert "only 2 of 3 instances began initialize() within 3 s" in error, error
