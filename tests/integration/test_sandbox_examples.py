# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Every model of examples/model_repository, torch and jax ones included,
serves its own client under stub-sandbox=true (the default
stub-sandbox-network=none, Landlock-confined files), as it does unsandboxed
(docs/hardening.md, "Process lifetime and the sandbox")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_sandbox_tightens import SANDBOX

from server import EXAMPLES, TritonServer, build_repository, run_example_client


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("sandbox_examples")
    names = sorted(p.name for p in (EXAMPLES / "model_repository").iterdir() if p.is_dir())
    srv = TritonServer(build_repository(work / "repo", names), work, args=SANDBOX)
    try:
        srv.wait_ready(timeout=300)
        yield srv
    finally:
        srv.stop_after_cancelled_streams()


# (example, client arguments, " ok" lines; None: checked below).
RUNS = [
    ("add_sub", ["--http", "{http}", "--grpc", "{grpc}"], 2),
    ("square", ["--grpc", "{grpc}", "3", "0", "5"], 3),
    ("auto_complete", ["--http", "{http}"], 4),
    ("bls", ["--http", "{http}"], 3),
    ("bls_async", ["--http", "{http}"], 1),
    ("bls_decoupled", ["--grpc", "{grpc}"], 3),
    ("custom_metrics", ["--http", "{http}", "--metrics", "{metrics}"], None),
    ("preprocessing", ["--http", "{http}"], 6),
    ("render", ["--http", "{http}"], 4),
    ("render", ["--grpc", "{grpc}"], 4),
    ("pytorch", ["--http", "{http}"], 4),
    ("jax", ["--grpc", "{grpc}"], 4),
    ("llm", ["--grpc", "{grpc}"], 3),
    ("mock_llm", ["--grpc", "{grpc}", "--streams", "16", "--tokens", "10"], 1),
]


@pytest.mark.parametrize(
    "example,args,oks", RUNS, ids=[f"{e}-{a[0].lstrip('-')}" for e, a, _ in RUNS]
)
def test_example_client_under_the_sandbox(
    sandboxed: TritonServer, example: str, args: list[str], oks: int | None
) -> None:
    srv = sandboxed
    urls = {"http": srv.http_url, "grpc": srv.grpc_url, "metrics": f"localhost:{srv.metrics_port}"}
    out = run_example_client(example, *(a.format(**urls) for a in args), oks=oks, timeout=300)
    if example == "custom_metrics":
        assert 'custom_metrics_requests_total{model="custom_metrics"} 5' in out, out


def test_instance_kind_under_the_sandbox(sandboxed: TritonServer) -> None:
    """Each instance answers from a stub of its own. Each stub is pid 1 of
    a pid namespace of its own, so the pids are all 1 and the client tells
    the three processes apart by their pid namespaces (docs/hardening.md)."""
    out = run_example_client("instance_kind", "--http", sandboxed.http_url, oks=4, timeout=300)
    lines = [line for line in out.splitlines() if "pid namespace" in line]
    assert len(lines) == 3 and all(" pid       1 " in line for line in lines), out
    namespaces = {line.split("pid namespace ")[1].split(")")[0] for line in lines}
    assert len(namespaces) == 3 and "0" not in namespaces, out
    assert "3 of 3 instances answered, in 3 processes  ok" in out, out
