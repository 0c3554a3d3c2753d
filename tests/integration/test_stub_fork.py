# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Stubs forked from a template (stub-fork, the default) are the stubs an
exec'd interpreter would be: same ids, group, descriptors, environment,
argv, path, sandbox and limits, with random state and a multiprocessing
authkey of their own. A module
that starts a thread makes its template refuse (its model's stubs are
exec'd); a template that dies is started again, and running stubs do not
notice."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import (
    TritonServer,
    build_repository,
    children,
    load_failure,
    running,
    wait_gone,
    wait_until,
)

PRELOAD_DIR = Path(__file__).resolve().parent / "preload"
INSTANCES = {"fork_probe_0_0", "fork_probe_0_1"}


def facts(srv: TritonServer, model: str = "fork_probe", value: int = 0) -> dict[str, Any]:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=60)
    try:
        inp = httpclient.InferInput("IN", [1], "INT32")
        inp.set_data_from_numpy(np.array([value], np.int32))
        return dict(json.loads(c.infer(model, [inp]).as_numpy("INFO")[0]))
    finally:
        c.close()


def facts_of_each(srv: TritonServer, model: str = "fork_probe") -> dict[str, dict[str, Any]]:
    """The facts of each instance of ``model`` (asked until both answered)."""
    seen: dict[str, dict[str, Any]] = {}

    def both() -> bool:
        f = facts(srv, model)
        seen[f["instance"].replace(model, "fork_probe")] = f
        return set(seen) == INSTANCES

    wait_until(both, timeout=60)
    return seen


def comparable(f: dict[str, Any], work: str) -> dict[str, Any]:
    """What must not differ between a forked stub and an exec'd one (the
    server's directory ``work`` written as W)."""
    f = json.loads(json.dumps(f).replace(work, "W"))
    # threads_at_load: an exec'd stub's OpenBLAS started its threads at
    # import, a forked one's at its first BLAS call (the test below).
    own = ("pid", "ppid", "pgid", "random", "numpy_random", "authkey", "threads_at_load")
    out = {k: v for k, v in f.items() if k not in own}
    out["cmdline"] = [a for a in f["cmdline"] if a]  # a forked one's ends in padding
    out["ns_pid"] = out["ns_user"] = out["ns_mnt"] = None  # each stub's own in the sandbox
    out["forked"] = None
    # The two servers' logs have their own names.
    out["fds"] = {k: "log" if v.endswith(".log") else v for k, v in f["fds"].items()}
    return out


def test_a_forked_stub_starts_openblas_s_threads_at_its_first_blas_call(tmp_path: Path) -> None:
    """A new OpenBLAS worker spins about a tenth of a second of a CPU: a
    forked stub has none once loaded, and the count an exec'd stub has
    (its CPUs) from its first product on."""
    cpus = len(os.sched_getaffinity(0))
    assert cpus >= 2, f"this test needs 2 CPUs to tell OpenBLAS's pool from none; it has {cpus}"
    seen = {}
    for fork in ("true", "false"):
        with running(server_for(tmp_path / fork, f"stub-fork={fork}")) as srv:
            seen[fork] = facts_of_each(srv)
    for name in INSTANCES:
        forked, execd = seen["true"][name], seen["false"][name]
        assert forked["forked"] and not execd["forked"], (forked, execd)
        assert forked["blas_threads"] == execd["blas_threads"] == cpus, (forked, execd)
        assert forked["blas_product"] == execd["blas_product"] == 512.0
        after = int(forked["status"]["Threads"][0])
        # The product started cpus - 1 workers beside the caller; an exec'd
        # stub had them since numpy's import.
        assert after - forked["threads_at_load"] == cpus - 1, forked
        assert int(execd["status"]["Threads"][0]) == execd["threads_at_load"], execd


def server_for(work: Path, *extra: str) -> TritonServer:
    return TritonServer(
        build_repository(work / "repo", ["fork_probe"]),
        work,
        args=[f"--backend-config=tritonpy,{e}" for e in extra],
    )


@pytest.mark.parametrize("sandbox", [False, True], ids=["plain", "sandboxed"])
def test_a_forked_stub_is_the_stub_an_exec_would_start(tmp_path: Path, sandbox: bool) -> None:
    extra = ["stub-sandbox=true", "stub-sandbox-max-processes=64"] if sandbox else []
    seen = {}
    for fork in ("true", "false"):
        # numpy.random (which numpy imports lazily) and multiprocessing in
        # the template: the global RandomState must be reseeded and the
        # authkey drawn again in each stub.
        preload = "stub-preload=numpy,numpy.random,multiprocessing"
        settings = [f"stub-fork={fork}", preload, *extra]
        with running(server_for(tmp_path / fork, *settings)) as srv:
            seen[fork] = facts_of_each(srv)
            templates = children(srv.proc.pid, templates=True)
            # Sandboxed: the shared one. Not sandboxed: the model's own,
            # which forked the stub that ran auto_complete_config too, and
            # the shared one it was forked from.
            expected = 0 if fork == "false" else 1 if sandbox else 2
            assert len(templates) == expected, templates
            for f in seen[fork].values():
                assert f["forked"] == (fork == "true"), f
                if sandbox:
                    assert f["pid"] == 1 and f["ppid"] == 0, f
                    assert f["ns_pid"] != os.readlink(f"/proc/{srv.proc.pid}/ns/pid"), f
                else:
                    # The server's own child, in a group of its own.
                    assert f["ppid"] == srv.proc.pid and f["pgid"] == f["pid"], f
        if fork == "true":
            stubs = [f["pid"] for f in seen[fork].values()] if not sandbox else []
            assert not wait_gone(templates + stubs), "the template outlived the server"
    for name in INSTANCES:
        forked = comparable(seen["true"][name], str(tmp_path / "true"))
        execd = comparable(seen["false"][name], str(tmp_path / "false"))
        for key in execd:
            assert forked[key] == execd[key], (key, forked[key], execd[key])
    # Each forked stub has random state and an authkey of its own, not the
    # template's.
    a, b = (seen["true"][n] for n in sorted(INSTANCES))
    for key in ("random", "numpy_random", "authkey"):
        assert a[key] != b[key], (key, a, b)


def variant(repo: Path, name: str, preload: str) -> None:
    """fork_probe as model ``name`` of ``repo``, with parameter
    stub_preload=``preload``."""
    dest = repo / name
    os.rename(build_repository(repo.parent / name, ["fork_probe"]) / "fork_probe", dest)
    config = (dest / "config.pbtxt").read_text().replace('"fork_probe"', f'"{name}"')
    config += f'parameters {{ key: "stub_preload" value {{ string_value: "{preload}" }} }}\n'
    (dest / "config.pbtxt").write_text(config)


def model_template(srv: TritonServer, model: str) -> int:
    """The pid of the latest template of ``model``'s own, from its log."""
    found = re.findall(rf"model '{model}' version \d+ #\d+\) started, pid (\d+)", srv.log())
    assert found, srv.log()[-3000:]
    return int(found[-1])


def template_preloads(srv: TritonServer) -> set[str]:
    out = set()
    for pid in children(srv.proc.pid, templates=True):
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        out.add(args[args.index(b"--preload") + 1].decode())
    return out


def test_a_model_with_its_own_preload_gets_a_template_of_its_own(tmp_path: Path) -> None:
    repo = build_repository(tmp_path / "repo", ["fork_probe"])
    variant(repo, "fork_probe_json", " json, numpy ")
    variant(repo, "fork_probe_bad", "numpy,not a module")
    with running(TritonServer(repo, tmp_path, args=["--model-control-mode=explicit"])) as srv:
        message = load_failure(srv, "fork_probe_bad")
        assert (
            "tritonpy: model 'fork_probe_bad' parameter: stub_preload takes module names "
            "separated by commas; got 'not a module'" in message
        ), message
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        try:
            c.load_model("fork_probe")
            c.load_model("fork_probe_json")
        finally:
            c.close()
        assert template_preloads(srv) == {"numpy", "numpy,json"}
        for model in ("fork_probe", "fork_probe_json"):
            for f in facts_of_each(srv, model).values():
                assert f["forked"] and f["ppid"] == srv.proc.pid, f


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("stub_fork")
    repo = build_repository(work / "repo", ["fork_probe"])
    # The same model, whose template would import a module that starts a
    # thread (tests/integration/preload/starts_thread.py).
    threaded = repo / "fork_probe_threaded"
    os.rename(build_repository(work / "more", ["fork_probe"]) / "fork_probe", threaded)
    config = (
        (threaded / "config.pbtxt").read_text().replace('"fork_probe"', '"fork_probe_threaded"')
    )
    config += 'parameters { key: "stub_preload" value { string_value: "starts_thread" } }\n'
    (threaded / "config.pbtxt").write_text(config)
    srv = TritonServer(repo, work, prefix=["env", f"PYTHONPATH={PRELOAD_DIR}"])
    with running(srv):
        yield srv


def test_a_module_that_starts_a_thread_makes_its_template_refuse(
    fork_server: TritonServer,
) -> None:
    # The model's own template (its auto-complete stub forks from it too).
    refused = re.compile(
        r"preload 'numpy,starts_thread', model 'fork_probe_threaded' version 1 #\d+\) "
        r"cannot fork stubs: importing 'starts_thread' started a thread \(preload-thread\): "
        r"a template with threads cannot fork; its stubs start afresh \(exec\) instead"
    )
    wait_until(lambda: refused.search(fork_server.log()) is not None, timeout=60)
    for f in facts_of_each(fork_server, "fork_probe_threaded").values():
        assert not f["forked"], f
    # The other model's template is not concerned.
    for f in facts_of_each(fork_server).values():
        assert f["forked"], f


def test_a_dead_template_is_started_again_and_its_stubs_serve_on(
    fork_server: TritonServer,
) -> None:
    before = {f["instance"]: f["pid"] for f in facts_of_each(fork_server).values()}
    template = model_template(fork_server, "fork_probe")
    os.kill(template, signal.SIGKILL)
    assert not wait_gone([template])
    # Running stubs are unaffected.
    assert {f["instance"]: f["pid"] for f in facts_of_each(fork_server).values()} == before
    # A stub that dies is forked again, from a new template.
    mark = fork_server.log_size()
    with pytest.raises(InferenceServerException):
        facts(fork_server, value=3)  # the stub exits
    new: list[dict[str, Any]] = []

    def restarted() -> bool:
        f = facts(fork_server)
        if before[f["instance"]] != f["pid"]:
            new.append(f)
        return bool(new)

    wait_until(restarted, timeout=60)
    assert new[0]["forked"] and new[0]["ppid"] == fork_server.proc.pid, new
    assert fork_server.wait_log(
        f"pid {template} killed by signal 9 (SIGKILL); starting it again "
        "(running stubs are unaffected)",
        after=mark,
    ), fork_server.log()[mark:]
    again = model_template(fork_server, "fork_probe")
    assert again != template and again in children(fork_server.proc.pid, templates=True)
