# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Instance groups through a real tritonserver: KIND_CPU and KIND_MODEL
groups with several instances, one stub process each, each initialized
with its own args; KIND_GPU on this machine (no GPU) refused by Triton as
the official backend's load is; the instance_kind example's client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import tritonclient.http as httpclient

from server import (
    TritonServer,
    build_repository,
    load_failure,
    run_example_client,
    running,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("instances")
    repo = build_repository(work / "repo", ["instances", "instance_kind", "gpu_instance"])
    srv = TritonServer(
        repo, work, args=["--model-control-mode=explicit", "--load-model=instance_kind"]
    )
    with running(srv):
        yield srv


def test_each_instance_gets_its_own_args_and_process(server: TritonServer) -> None:
    before = set(server.stubs())
    c = httpclient.InferenceServerClient(server.http_url)
    try:
        c.load_model("instances")
        served = c.get_model_config("instances")
    finally:
        c.close()
    lines = (server.repo / "instances" / "initialized.jsonl").read_text().splitlines()
    inits = [json.loads(line) for line in lines]
    by_name = {i["args"]["model_instance_name"]: i for i in inits}
    assert sorted(by_name) == ["instances_1_0", "pair_0", "pair_1"], by_name.keys()
    kinds = {name: i["args"]["model_instance_kind"] for name, i in by_name.items()}
    assert kinds == {"pair_0": "CPU", "pair_1": "CPU", "instances_1_0": "MODEL"}
    for i in inits:
        args = i["args"]
        assert args["model_name"] == "instances" and args["model_version"] == "1"
        assert args["model_repository"] == str(server.repo / "instances")
        assert args["model_instance_device_id"] == "0"
        assert all(isinstance(v, str) for v in args.values())
        config = json.loads(args["model_config"])
        assert config["name"] == "instances"
        assert [(g["name"], g["kind"], g["count"]) for g in config["instance_group"]] == [
            (g["name"], g["kind"], g["count"]) for g in served["instance_group"]
        ]
        assert [g["kind"] for g in config["instance_group"]] == ["KIND_CPU", "KIND_MODEL"]
    # One stub per instance, the one that ran auto_complete_config among
    # them: no extra process is left.
    pids = {i["pid"] for i in inits}
    assert len(pids) == 3
    assert set(server.stubs()) - before == pids


def test_example_client_sees_every_instance(server: TritonServer) -> None:
    out = run_example_client("instance_kind", "--http", server.http_url, oks=4)
    for name in ("cpu_pair_0", "cpu_pair_1", "whole_model_0"):
        assert name in out


def test_kind_gpu_without_a_gpu_is_refused_as_on_the_official_backend(
    server: TritonServer, official_examples: TritonServer
) -> None:
    ours = load_failure(server, "gpu_instance")
    # Triton refuses the group before the backend sees the model.
    assert "of model gpu_instance has kind KIND_GPU but no GPUs are available" in ours, ours
    assert ours == load_failure(official_examples, "gpu_instance")
