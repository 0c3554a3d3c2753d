# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Sync BLS from processes a model forks (a multiprocessing pool inside
execute(), as Triton's own BLS tests do): every child's exec() gets its
own answer while the others call at the same time, large tensors go both
ways, and the model and the server serve on afterwards. Each child makes
its own connection to the backend (BLS_CHANNEL, docs/protocol.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository, explicit, running

MODELS = ["add_sub_any", "bls_pool"]


@pytest.fixture(scope="module")
def pool_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("bls_fork")
    srv = TritonServer(build_repository(work / "repo", MODELS), work, args=explicit(MODELS))
    with running(srv):
        yield srv


def _sums(
    srv: TritonServer,
    count: int,
    elements: int | None = None,
    concurrent: int | None = None,
    pool: int | None = None,
) -> list[float]:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120.0)
    try:
        inputs = []
        for name, value in (
            ("COUNT", count),
            ("ELEMENTS", elements),
            ("CONCURRENT", concurrent),
            ("POOL", pool),
        ):
            if value is not None:
                inputs.append(httpclient.InferInput(name, [1], "INT32"))
                inputs[-1].set_data_from_numpy(np.array([value], np.int32))
        return c.infer("bls_pool", inputs).as_numpy("SUMS").tolist()
    finally:
        c.close()


def test_a_forked_child_gets_its_own_bls_answer(pool_server: TritonServer) -> None:
    # A new pool each time: each child is a fresh fork of the stub, and the
    # stub serves on after each one called and exited.
    for _ in range(3):
        assert _sums(pool_server, 1) == [2.0]


def test_forked_children_calling_at_once_each_get_their_own_answer(
    pool_server: TritonServer,
) -> None:
    # Ten numbers over eight processes at once, three pools in a row: every
    # answer is the one of its own call.
    for _ in range(3):
        assert _sums(pool_server, 10) == [2.0 * n for n in range(1, 11)]


def test_a_pool_made_in_execute_and_kept_serves_every_request(pool_server: TritonServer) -> None:
    # Its processes were forked while the model served: their connections
    # stay open across requests.
    for _ in range(3):
        assert _sums(pool_server, 4, pool=2) == [2.0, 4.0, 6.0, 8.0]


def test_a_pool_forked_in_initialize_is_refused_bls_with_the_official_message(
    pool_server: TritonServer,
) -> None:
    with pytest.raises(InferenceServerException) as failed:
        _sums(pool_server, 2, pool=1)
    assert "BLS is only supported during the 'execute' function." in str(failed.value)
    # Refused in the children only: the stub and its other pools serve on.
    assert _sums(pool_server, 3) == [2.0, 4.0, 6.0]


def test_forked_children_send_and_receive_large_tensors(pool_server: TritonServer) -> None:
    # 1 MB inputs (in the child's own arenas) and outputs (in the BLS arenas
    # the backend announces to each child): every element is checked in the
    # child.
    assert _sums(pool_server, 4, elements=250_000) == [2.0, 4.0, 6.0, 8.0]
    assert _sums(pool_server, 1) == [2.0]


def test_a_forked_childs_coroutines_call_at_once(pool_server: TritonServer) -> None:
    # async_exec() in a child: five calls from coroutines of the child's
    # own event loop, in flight together, in each of three children.
    assert _sums(pool_server, 3, concurrent=5) == [2.0, 4.0, 6.0]


def test_forked_children_of_a_sandboxed_stub_get_their_answers(tmp_path: Path) -> None:
    # The sandbox lets a stub make a socket pair and pass it: its children
    # call as any others do.
    args = [*explicit(MODELS), "--backend-config=tritonpy,stub-sandbox=true"]
    srv = TritonServer(build_repository(tmp_path / "repo", MODELS), tmp_path, args=args)
    with running(srv):
        assert _sums(srv, 6) == [2.0 * n for n in range(1, 7)]
        assert _sums(srv, 2, elements=100_000) == [2.0, 4.0]


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    # A server of its own: no other channel is open on its instance.
    work = tmp_path_factory.mktemp("bls_fork_hostile")
    models = ["add_sub_any", "bls_pool", "bls_fork_hostile"]
    srv = TritonServer(build_repository(work / "repo", models), work, args=explicit(models))
    with running(srv):
        yield srv


def _ask(srv: TritonServer, mode: str) -> object:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120.0)
    try:
        inp = httpclient.InferInput("MODE", [1], "BYTES")
        inp.set_data_from_numpy(np.array([mode.encode()], dtype=np.object_))
        return json.loads(c.infer("bls_fork_hostile", [inp]).as_numpy("ANSWER")[0])
    finally:
        c.close()


def test_a_stub_keeps_at_most_64_channels_open(hostile_server: TritonServer) -> None:
    # Eighty at once: the first 64 stay open, each one past them is closed
    # at once; the stub is not restarted, and once they are closed children
    # get channels again.
    pid = _ask(hostile_server, "pid")
    assert _ask(hostile_server, "flood:80") == list(range(64, 80))
    assert hostile_server.wait_log("64 are open already", 30), hostile_server.log()[-3000:]
    assert _ask(hostile_server, "close") == 80
    assert _ask(hostile_server, "pid") == pid


def test_a_channel_that_breaks_the_protocol_is_closed_alone(
    hostile_server: TritonServer,
) -> None:
    pid = _ask(hostile_server, "pid")
    assert _ask(hostile_server, "garbage") == {"types": ["ERROR"], "eof": True}
    assert hostile_server.wait_log("closing the BLS channel of", 30)
    assert _ask(hostile_server, "pid") == pid  # the stub was not touched
    assert _sums(hostile_server, 2) == [2.0, 4.0]
