# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A model's own stub template (docs/hardening.md, "Stub templates"): with
no stub_preload, a model's stubs fork from a template that imported its
model.py and ran its initialize_shared once; a reload imports a changed
model.py again; a model whose import starts a thread is exec'd, with one
warning; stub-fork=false execs every stub, which then runs
initialize_shared itself."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from test_stub_fork import facts, facts_of_each

from server import (
    TritonServer,
    build_repository,
    children,
    explicit,
    running,
    sample,
    scrape,
    wait_until,
)

MiB = 1 << 20
INSTANCES = {"shared_weights_0_0", "shared_weights_0_1"}
MODEL = "shared_weights"
PRIVATE = "tritonpy_stub_memory_private_bytes"


def events(repo: Path, model: str = "shared_weights") -> list[tuple[str, int]]:
    path = repo / model / "1" / "events.log"
    if not path.exists():
        return []
    return [(w, int(p)) for w, p in (line.split() for line in path.read_text().splitlines())]


def server(work: Path, *settings: str, models: list[str] | None = None) -> TritonServer:
    repo = build_repository(work / "repo", ["shared_weights"])
    return TritonServer(
        repo,
        work,
        args=[
            *explicit(models or ["shared_weights"]),
            "--backend-config=tritonpy,stub-memory-interval-seconds=0.2",
            *(f"--backend-config=tritonpy,{s}" for s in settings),
        ],
    )


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with running(server(tmp_path_factory.mktemp("model_template"))) as srv:
        yield srv


def test_instances_fork_from_a_template_that_ran_initialize_shared_once(
    model_server: TritonServer,
) -> None:
    seen = facts_of_each(model_server, MODEL)
    stubs = {f["pid"] for f in seen.values()}
    for f in seen.values():
        assert f["forked"], f
        # The class's state, made once, with initialize's args less the
        # instance's own.
        assert f["total"] == 16 * MiB / 4, f
        assert f["args_keys"] == [
            "model_config",
            "model_name",
            "model_repository",
            "model_version",
        ], f
    happened = events(model_server.repo)
    shared = [pid for what, pid in happened if what == "shared"]
    assert len(shared) == 1 and shared[0] not in stubs, happened
    # model.py was imported once, by the template: the stub that ran
    # auto_complete_config forked from it too (and was not kept).
    imports = [pid for what, pid in happened if what == "import"]
    assert imports == shared, happened
    assert model_server.wait_log("model 'shared_weights' version 1 #"), model_server.log()[-3000:]


def test_a_reload_imports_a_changed_model_file_again(model_server: TritonServer) -> None:
    facts_of_each(model_server, MODEL)
    before = set(children(model_server.proc.pid, templates=True))
    model_py = model_server.repo / "shared_weights" / "1" / "model.py"
    model_py.write_text(model_py.read_text().replace('VERSION = "v1"', 'VERSION = "v2"'))
    c = httpclient.InferenceServerClient(model_server.http_url, network_timeout=120)
    try:
        c.load_model("shared_weights")
    finally:
        c.close()
    seen = facts_of_each(model_server, MODEL)
    assert {f["version"] for f in seen.values()} == {"v2"}, seen
    assert all(f["forked"] for f in seen.values()), seen
    assert [w for w, _ in events(model_server.repo)].count("shared") == 2
    # The old model's template ended with it (the shared one, if any ran,
    # stays).
    wait_until(
        lambda: (
            len(set(children(model_server.proc.pid, templates=True)) & before) == len(before) - 1
        )
    )


def test_a_model_whose_import_starts_a_thread_is_execd_with_one_warning(tmp_path: Path) -> None:
    srv = server(tmp_path)
    model_py = srv.repo / "shared_weights" / "1" / "model.py"
    model_py.write_text(
        model_py.read_text().replace(
            '_event("import")\n',
            '_event("import")\n'
            "import threading\n"
            "_stop = threading.Event()\n"
            "threading.Thread(target=_stop.wait, daemon=True).start()\n",
        )
    )
    with running(srv):
        for f in facts_of_each(srv, MODEL).values():
            assert not f["forked"], f
            assert f["total"] == 16 * MiB / 4, f  # initialize_shared ran in the stub
        warning = "model.py started a thread"
        assert srv.wait_log(warning), srv.log()[-3000:]
        assert srv.log().count(warning) == 1, srv.log()[-5000:]
        shared = [pid for what, pid in events(srv.repo) if what == "shared"]
        assert len(shared) == 2, shared  # once in each exec'd stub


def private_bytes(srv: TritonServer) -> dict[str, float]:
    text = scrape(srv)
    out = {}
    for name in INSTANCES:
        value = sample(text, PRIVATE, model="shared_weights", instance=name)
        if value is not None:
            out[name] = value
    return out


def test_forked_stubs_own_far_less_memory_than_execd_ones(tmp_path: Path) -> None:
    """The gauges of a forked instance against an exec'd one: torch and
    the weights are the template's pages."""
    seen = {}
    for fork in ("true", "false"):
        with running(server(tmp_path / fork, f"stub-fork={fork}")) as srv:
            facts_of_each(srv, MODEL)
            for _ in range(20):
                facts(srv, MODEL)
            wait_until(lambda: len(private_bytes(srv)) == 2, timeout=60)
            seen[fork] = max(private_bytes(srv).values())
    assert seen["true"] < seen["false"] / 3, seen


def test_models_that_open_with_torch_fork_their_templates_from_one_that_imported_it(
    tmp_path: Path,
) -> None:
    # Two models of two instances each whose model.py opens with torch
    # (after numpy, preloaded, and the standard library). The second's
    # template forks from the template made to import torch, whose OpenMP
    # runtime was loaded with the stubs' thread count: its
    # initialize_shared fills 16 MiB of weights, a parallel region that
    # would start threads (and refuse the template) on more than one.
    srv = server(tmp_path)
    copy = srv.repo / "shared_weights_b"
    shutil.copytree(srv.repo / MODEL, copy)
    config = copy / "config.pbtxt"
    config.write_text(config.read_text().replace(f'"{MODEL}"', '"shared_weights_b"'))
    with running(srv):
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=300)
        try:
            c.load_model("shared_weights_b")
        finally:
            c.close()
        for name in (MODEL, "shared_weights_b"):
            for f in facts_of_each(srv, name).values():
                assert f["forked"] and f["total"] == 16 * MiB / 4, f
        log = srv.log()
        assert "cannot fork stubs" not in log, log[-5000:]
        parents = re.findall(
            r"model '(shared_weights(?:_b)?)' version 1 #\d+\) started, pid \d+, "
            r"forked from the stub template \(([^)]*)\)",
            log,
        )
        assert sorted(name for name, _ in parents) == [MODEL, "shared_weights_b"], log[-5000:]
        assert sum("opening imports 'torch'" in parent for _, parent in parents) == 1, parents
        # Each model's initialize_shared ran once, in its own template.
        for repo_model in (MODEL, "shared_weights_b"):
            shared = [pid for what, pid in events(srv.repo, repo_model) if what == "shared"]
            assert len(shared) == 1, (repo_model, shared)
