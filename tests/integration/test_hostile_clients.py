# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A remote client is untrusted (docs/hardening.md, "Hostile clients"):
each kind of malformed or extreme request of hostile_cases.py, over HTTP
or gRPC, to the example models on one server. Each case must get its
class of answer (the official backend's, or an error with a clear
message), kill no stub (none dies in the log, every stub pid stays), and
leave its model answering a well-formed request from the same stub."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hostile_cases import CASES, MODELS
from hostile_requests import DEATH, StubWatch
from hostile_senders import probe
from server import TritonServer, build_repository, running


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("hostile_clients")
    with running(TritonServer(build_repository(work / "repo", MODELS), work)) as srv:
        yield srv


def answers(srv: TritonServer, model: str) -> None:
    """``model`` answers its well-formed request."""
    a = probe(srv, model)
    assert a.ok, f"{model} no longer answers: {a}"


@pytest.mark.parametrize("kind", CASES)
def test_a_hostile_request_gets_an_answer_and_kills_no_stub(
    hostile_server: TritonServer, kind: str
) -> None:
    case = CASES[kind]
    watch = StubWatch(hostile_server)
    answer = case.send(hostile_server)
    # Whatever the answer, the model's next request is served by the same
    # stub: the request behind it in its queue shows any late death.
    answers(hostile_server, case.model)
    assert watch.deaths() == [], (kind, answer)
    assert case.expect.holds(answer), (kind, case.expect, answer)


def test_every_model_answers_after_all_cases(hostile_server: TritonServer) -> None:
    watch = StubWatch(hostile_server)
    for model in MODELS:
        answers(hostile_server, model)
    assert watch.deaths() == []
    assert DEATH.findall(hostile_server.log()) == []
