# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Each stub's PSS and private memory, read by the backend from
/proc/<pid>/smaps_rollup: as gauges at Triton's metrics endpoint (labelled
by model, version and instance, gone with the stub) and, with
TRITONPY_DEBUG=1, as lines in Triton's log (docs/performance.md)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator

import pytest

from server import TritonServer, build_repository, children, running, sample, scrape, wait_until

PSS = "tritonpy_stub_memory_pss_bytes"
PRIVATE = "tritonpy_stub_memory_private_bytes"
MiB = 1 << 20
HOG_MIB = 200
# How much more memory_big must show than memory_hog: the block, less a
# margin. Two stubs' own pages differ by a few MiB (forked stubs copy
# different pages of the template on write), so the whole 200 MiB is not a
# floor; without the block the difference is near 0.
SEEN = (HOG_MIB - 32) * MiB


@pytest.fixture(scope="module")
def memory_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("memory")
    repo = build_repository(work / "repo", ["memory_hog"])
    # memory_big: the same model holding 200 MiB written in initialize().
    shutil.copytree(repo / "memory_hog", repo / "memory_big")
    config = (repo / "memory_big" / "config.pbtxt").read_text()
    config = config.replace('"memory_hog"', '"memory_big"')
    config = config.replace('string_value: "0"', f'string_value: "{HOG_MIB}"')
    (repo / "memory_big" / "config.pbtxt").write_text(config)
    saved = os.environ.get("TRITONPY_DEBUG")
    os.environ["TRITONPY_DEBUG"] = "1"  # inherited by tritonserver
    try:
        srv = TritonServer(
            repo,
            work,
            args=[
                "--model-control-mode=explicit",
                "--load-model=memory_hog",
                "--load-model=memory_big",
                # Often, so that a test waits little for a new reading.
                "--backend-config=tritonpy,stub-memory-interval-seconds=0.2",
            ],
        )
    finally:
        if saved is None:
            del os.environ["TRITONPY_DEBUG"]
        else:
            os.environ["TRITONPY_DEBUG"] = saved
    with running(srv):
        yield srv


def labels(model: str) -> dict[str, str]:
    return {"kind": "stub", "model": model, "version": "1", "instance": f"{model}_0_0"}


def readings(srv: TritonServer, model: str) -> tuple[float | None, float | None]:
    text = scrape(srv)
    return sample(text, PSS, **labels(model)), sample(text, PRIVATE, **labels(model))


def test_gauges_report_each_stub(memory_server: TritonServer) -> None:
    srv = memory_server

    def settled() -> bool:
        small, big = readings(srv, "memory_hog"), readings(srv, "memory_big")
        return None not in (*small, *big) and big[1] >= small[1] + SEEN  # type: ignore[operator]

    # The readings follow the load at once (a stub is read when it starts,
    # after initialize()): waiting on them, never on the clock.
    wait_until(settled, timeout=60)
    (small_pss, small_private), (big_pss, big_private) = (
        readings(srv, "memory_hog"),
        readings(srv, "memory_big"),
    )
    assert small_pss and small_private and big_pss and big_private
    for pss, private in ((small_pss, small_private), (big_pss, big_private)):
        assert 0 < private <= pss, (pss, private)
    # A stub is an interpreter with numpy: tens of MiB, not KiB, not GiB.
    assert 5 * MiB < small_pss < 1024 * MiB, small_pss
    assert big_private - small_private >= SEEN, (big_private, small_private)
    assert big_pss - small_pss >= SEEN, (big_pss, small_pss)


def test_debug_lines_name_the_stub(memory_server: TritonServer) -> None:
    srv = memory_server
    line = re.compile(
        r"tritonpy-debug memory model 'memory_big' instance 'memory_big_0_0' "
        r"pid=(\d+): pss_bytes=(\d+) private_bytes=(\d+) rss_bytes=(\d+)"
    )
    wait_until(lambda: line.search(srv.log()), timeout=60)
    pid, pss, private, rss = (int(x) for x in line.findall(srv.log())[-1])
    # The pid is the one the backend started for memory_big.
    started = re.findall(
        r"started stub for model 'memory_big' instance 'memory_big_0_0' \(pid (\d+)\)", srv.log()
    )
    assert started and int(started[-1]) == pid, (started, pid)
    assert private >= HOG_MIB * MiB and private <= pss <= rss


def test_series_go_with_the_model(memory_server: TritonServer) -> None:
    srv = memory_server
    wait_until(lambda: readings(srv, "memory_hog")[0] is not None, timeout=60)
    assert srv.request("POST", "/v2/repository/models/memory_hog/unload", b"")[0] == 200
    wait_until(lambda: readings(srv, "memory_hog") == (None, None), timeout=60)
    assert readings(srv, "memory_big")[0] is not None
    assert srv.request("POST", "/v2/repository/models/memory_hog/load", b"")[0] == 200
    wait_until(lambda: readings(srv, "memory_hog")[1] is not None, timeout=60)


def test_the_stub_template_is_reported_too(memory_server: TritonServer) -> None:
    """With stub-fork (the default) the stubs are forked from a template,
    which the backend reads as it reads a stub, labelled kind="template"."""
    srv = memory_server
    (template,) = children(srv.proc.pid, templates=True)
    want = {"kind": "template", "instance": f"template pid {template}"}

    def read() -> tuple[float | None, float | None]:
        text = scrape(srv)
        return sample(text, PSS, **want), sample(text, PRIVATE, **want)

    wait_until(lambda: None not in read(), timeout=60)
    pss, private = read()
    assert pss and private is not None
    assert 0 < private <= pss, (pss, private)
