# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""With instance-start-parallelism above 1, a model's instances start in
parallel, as the official backend's do (Triton's parallel instance
loading), at most that many at once. The start_together model's 4 instances each wait in
initialize() until `together` of them are there at once."""

from __future__ import annotations

import os
import re
from pathlib import Path

import tritonclient.http as httpclient

from server import TritonServer, build_repository, running

BOUND = "--backend-config=tritonpy,instance-start-parallelism=2"


def _serve(
    work: Path, together: int, wait_seconds: int, must_meet: bool, *args: str
) -> TritonServer:
    repo = build_repository(work / "repo", ["start_together"])
    config = repo / "start_together" / "config.pbtxt"
    text = config.read_text()
    text = text.replace('string_value: "4"', f'string_value: "{together}"')
    text = text.replace('string_value: "60"', f'string_value: "{wait_seconds}"')
    text = text.replace('string_value: "true"', f'string_value: "{str(must_meet).lower()}"')
    config.write_text(text)
    # Exec'd stubs: a model template would start its instances' stubs one
    # fork at a time; the forked path has a test of its own below.
    args = ("--backend-config=tritonpy,stub-fork=false", *args)
    return TritonServer(repo, work, args=["--model-control-mode=explicit", *args])


def _load_and_read_seen(srv: TritonServer) -> list[int]:
    """Loads start_together (it must load); how many instances were in
    initialize() when each one stopped waiting."""
    # Longer than the model's own wait: its error, not the client's timeout.
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=300)
    try:
        c.load_model("start_together")
    finally:
        c.close()
    assert srv.model_ready("start_together")
    return [int(x) for x in (srv.repo / "start_together" / "seen.txt").read_text().split()]


def test_all_instances_start_together(tmp_path: Path) -> None:
    # Started one after another, the first would wait for the others in vain.
    four = "--backend-config=tritonpy,instance-start-parallelism=4"
    with running(_serve(tmp_path, 4, 60, True, four)) as srv:
        assert len(_load_and_read_seen(srv)) == 4


def test_the_bound_lets_two_start_together(tmp_path: Path) -> None:
    with running(_serve(tmp_path, 2, 60, True, BOUND)) as srv:
        assert len(_load_and_read_seen(srv)) == 4  # in two pairs


def test_the_bound_keeps_a_third_out(tmp_path: Path) -> None:
    # Each waits 3 s for a third that never comes while the two turns are held.
    with running(_serve(tmp_path, 3, 3, False, BOUND)) as srv:
        seen = _load_and_read_seen(srv)
        assert len(seen) == 4 and max(seen) <= 2, seen


def test_by_default_instances_start_in_parallel(tmp_path: Path) -> None:
    """No key set: four starts per CPU, one per GiB of memory, 16 at most
    (docs/configuration.md), so two instances start together on any
    machine the tests run on."""
    with running(_serve(tmp_path, 2, 60, True)) as srv:
        assert len(_load_and_read_seen(srv)) == 4
        found = re.search(r"instance-start-parallelism=(\d+)", srv.log())
        assert found, srv.log()[-3000:]
        # Below the CPUs' bound only where memory is short.
        assert 2 <= int(found.group(1)) <= min(16, 4 * len(os.sched_getaffinity(0))), found[0]


def test_forked_instances_start_in_parallel_and_all_serve(tmp_path: Path) -> None:
    """Stubs forked from a model's template while Triton's loading threads
    start and end around them: each stub keeps the parent-death signal
    until it watches the server itself, and its kernel parent is the
    thread that started the template, so that thread must outlive them
    (it is the backend's own starter thread, not a loading thread)."""
    import numpy as np

    repo = build_repository(tmp_path / "repo", ["add_sub"])
    config = repo / "add_sub" / "config.pbtxt"
    config.write_text(config.read_text().replace("count: 1", "count: 8"))
    parallel = "--backend-config=tritonpy,instance-start-parallelism=8"
    srv = TritonServer(repo, tmp_path, args=["--model-control-mode=explicit", parallel])
    with running(srv):
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=300)
        try:
            for _ in range(3):  # the template started anew each round
                c.load_model("add_sub")
                assert srv.model_ready("add_sub")
                a = np.arange(4, dtype=np.float32)
                inputs = [httpclient.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
                for i in inputs:
                    i.set_data_from_numpy(a)
                for _ in range(16):
                    out = c.infer("add_sub", inputs).as_numpy("OUTPUT0")
                    assert (out == 2 * a).all()
                c.unload_model("add_sub")
        finally:
            c.close()
        assert "killed by signal" not in srv.log(), srv.log()[-3000:]
