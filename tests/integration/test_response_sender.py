# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Response senders through a real tritonserver, as the official backend
(24.06 and later) behaves: a default-mode request takes one response, sent
through its sender during execute() or after it returned (from a thread or
from the loop), with the final flag or followed by it; what breaks that rule
raises in the model and ends the request with an error, and the model
serves on. Decoupled models must return None. The error texts are the
official ones.

The models are tests/integration/models/sender_rules (plan.py says how a
PLAN input is answered) in several copies: sync and async execute, default
and decoupled, with and without dynamic batching."""

from __future__ import annotations

import queue
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository, running

# name: (model file, extra config)
COPIES = {
    "sender_rules": ("model.py", ""),
    "sender_rules_async": ("model_async.py", ""),
    "sender_rules_batching": (
        "model.py",
        "dynamic_batching { max_queue_delay_microseconds: 500000 }",
    ),
    "sender_rules_async_batching": (
        "model_async.py",
        "dynamic_batching { max_queue_delay_microseconds: 500000 }",
    ),
    "sender_rules_decoupled": ("model.py", "model_transaction_policy { decoupled: true }"),
    "sender_rules_decoupled_async": (
        "model_async.py",
        "model_transaction_policy { decoupled: true }",
    ),
}
DEFAULT_MODELS = ["sender_rules", "sender_rules_async"]
FAILED = "Failed to process the request(s) for model '{}_0_0', message: "
FINAL_FIRST = (
    "TritonModelException: Unable to send response. Non-decoupled model cannot send complete final before "
    "sending a response."
)
SECOND = "Unable to send response. Non-decoupled model cannot send more than one response."
CLOSED = "Unable to send response. Response sender has been closed."
# plan.py logs this, then the request's id, once its plan is over.
PLAN_DONE = "plan done: "


def _repository(dest: Path) -> Path:
    repo = build_repository(dest, ["sender_rules"])
    src = repo / "sender_rules"
    for name in COPIES:
        if name != "sender_rules":
            shutil.copytree(src, repo / name)
    for name, (model_file, extra) in COPIES.items():
        config = repo / name / "config.pbtxt"
        text = config.read_text() + f'default_model_filename: "{model_file}"\n{extra}\n'
        config.write_text(text)
    return repo


@pytest.fixture(scope="module")
def sender_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("senders")
    with running(TritonServer(_repository(work / "repo"), work)) as srv:
        yield srv


def _plan(text: str, mod: Any = grpcclient) -> list[Any]:
    inp = mod.InferInput("PLAN", [1, 1], "BYTES")
    inp.set_data_from_numpy(np.array([[text.encode()]], dtype=object))
    return [inp]


def stream(srv: TritonServer, model: str, plans: list[str], count: int) -> list[tuple[Any, Any]]:
    """Send ``plans`` on one gRPC stream; wait for ``count`` answers (each
    (INDEX or None, error or None)), then make sure no more come: once the
    model has logged that every plan is over, one more request on the same
    stream (the ping, answered by the same instance) must be answered with
    nothing else before it. Anything else gets ("more", error)."""
    tag = uuid.uuid4().hex[:12]
    ids = [f"{tag}-{i}" for i in range(len(plans))]
    got: queue.Queue = queue.Queue()
    answers: list[tuple[Any, Any]] = []
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        c.start_stream(lambda result, error: got.put((result, error)))
        for text, request_id in zip(plans, ids, strict=True):
            c.async_stream_infer(model, _plan(text), request_id=request_id)
        deadline = time.monotonic() + 30
        while len(answers) < count:
            result, error = got.get(timeout=max(0.1, deadline - time.monotonic()))
            index = None if result is None else int(result.as_numpy("INDEX").ravel()[0])
            answers.append((index, error))
        # A plan that returns a response and sends late ones holds the late
        # sends until we have the returned one (plan.py's answered()).
        answered = [srv.repo / model / "1" / f"answered-{request_id}" for request_id in ids]
        for path in answered:
            path.touch()
        for request_id in ids:
            wait_for_log(srv, PLAN_DONE + request_id, 0)
        for path in answered:
            path.unlink()
        decoupled = "decoupled: true" in COPIES[model][1]
        ping = f"{tag}-ping"
        c.async_stream_infer(
            model, _plan("pre=1,pre_final" if decoupled else "ret"), request_id=ping
        )
        while True:
            result, error = got.get(timeout=30)
            if result is not None and result.get_response().id == ping:
                break
            answers.append((None if result is None else "more", error))
        c.stop_stream()
    while not got.empty():
        result, error = got.get()
        answers.append((None if result is None else "more", error))
    return answers


def indexes(answers: list[tuple[Any, Any]]) -> list[int]:
    assert all(error is None and index != "more" for index, error in answers), answers
    return sorted(index for index, _ in answers)


def only_error(answers: list[tuple[Any, Any]]) -> str:
    ((index, error),) = answers
    assert index is None and isinstance(error, InferenceServerException), answers
    return error.message()


def serves_on(srv: TritonServer, model: str) -> None:
    assert indexes(stream(srv, model, ["ret"], 1)) == [0]


def wait_for_log(srv: TritonServer, text: str, before: int, timeout: float = 60.0) -> None:
    """Wait until the server log holds ``text`` more than ``before`` times."""
    deadline = time.monotonic() + timeout
    while srv.log().count(text) <= before:
        assert time.monotonic() < deadline, f"{text!r} not logged again"
        time.sleep(0.1)


# ---------------------------------------------------------------- default mode: one response


@pytest.mark.parametrize("model", DEFAULT_MODELS)
@pytest.mark.parametrize(
    "plan,index",
    [
        ("ret", 0),
        ("pre=1,pre_final", 1000),
        ("pre=1,post_final", 1000),
        ("post=1,post_final", 2000),
    ],
    ids=["returned", "sent", "sent_then_final_later", "sent_later"],
)
def test_one_response_however_it_is_sent(
    sender_server: TritonServer, model: str, plan: str, index: int
) -> None:
    assert indexes(stream(sender_server, model, [plan], 1)) == [index]


@pytest.mark.parametrize("model", DEFAULT_MODELS)
def test_one_response_sent_later_over_http(sender_server: TritonServer, model: str) -> None:
    with httpclient.InferenceServerClient(sender_server.http_url) as c:
        res = c.infer(model, _plan("post=1,post_final", httpclient))
        assert res.as_numpy("INDEX").ravel().tolist() == [2000]
        res = c.infer(model, _plan("pre=1,post_final", httpclient))
        assert res.as_numpy("INDEX").ravel().tolist() == [1000]


@pytest.mark.parametrize("model", ["sender_rules_batching", "sender_rules_async_batching"])
def test_each_request_of_a_batch_answers_its_own_way(
    sender_server: TritonServer, model: str
) -> None:
    plans = ["ret", "pre=1,pre_final", "post=1,post_final", "pre=1,post_final"]
    assert indexes(stream(sender_server, model, plans, 4)) == [0, 1000, 1000, 2000]


# ---------------------------------------------------------------- default mode: rule broken


@pytest.mark.parametrize("model", DEFAULT_MODELS)
@pytest.mark.parametrize("plan", ["pre_final", "post_final"], ids=["during", "after"])
def test_final_flag_before_any_response_is_an_error(
    sender_server: TritonServer, model: str, plan: str
) -> None:
    message = only_error(stream(sender_server, model, [plan], 1))
    assert message.startswith(FAILED.format(model) + FINAL_FIRST), message
    serves_on(sender_server, model)


@pytest.mark.parametrize("model", DEFAULT_MODELS)
def test_final_flag_before_any_response_over_http(sender_server: TritonServer, model: str) -> None:
    with (
        httpclient.InferenceServerClient(sender_server.http_url) as c,
        pytest.raises(InferenceServerException) as e,
    ):
        c.infer(model, _plan("post_final", httpclient))
    assert e.value.message().startswith(FAILED.format(model) + FINAL_FIRST), e.value.message()


@pytest.mark.parametrize("model", DEFAULT_MODELS)
@pytest.mark.parametrize(
    "plan,index",
    [("pre=2,pre_final", 1000), ("post=2,post_final", 2000)],
    ids=["during", "after"],
)
def test_a_second_response_raises_and_the_stream_keeps_the_first(
    sender_server: TritonServer, model: str, plan: str, index: int
) -> None:
    """The request ends with the error after its first response; on a
    stream, Triton passes a non-decoupled model's first response only."""
    assert indexes(stream(sender_server, model, [plan], 1)) == [index]
    serves_on(sender_server, model)


@pytest.mark.parametrize("model", DEFAULT_MODELS)
def test_returning_a_response_already_sent_fails_the_batch(
    sender_server: TritonServer, model: str
) -> None:
    """The sent response stands; the returned one is refused (the other
    requests of the batch, had there been any, fail with it)."""
    assert indexes(stream(sender_server, model, ["pre=1,pre_final,ret"], 1)) == [1000]
    serves_on(sender_server, model)


@pytest.mark.parametrize("model", DEFAULT_MODELS)
def test_sending_after_the_returned_response_raises(
    sender_server: TritonServer, model: str
) -> None:
    marker = f'send raised: {SECOND}"'  # the log quotes messages
    before = sender_server.log().count(marker)
    assert indexes(stream(sender_server, model, ["ret,post=1,post_final"], 1)) == [0]
    wait_for_log(sender_server, marker, before)


def test_execute_raising_names_the_instance(sender_server: TritonServer) -> None:
    with (
        httpclient.InferenceServerClient(sender_server.http_url) as c,
        pytest.raises(InferenceServerException) as e,
    ):
        c.infer("sender_rules", _plan("no_such_step", httpclient))
    message = e.value.message()
    assert message.startswith(
        FAILED.format("sender_rules") + "ValueError: unknown step 'no_such_step'"
    ), message


# ---------------------------------------------------------------- decoupled mode


@pytest.mark.parametrize("model", ["sender_rules_decoupled", "sender_rules_decoupled_async"])
def test_decoupled_execute_must_return_none(sender_server: TritonServer, model: str) -> None:
    message = only_error(stream(sender_server, model, ["ret"], 1))
    assert message.startswith(
        FAILED.format(model) + f"Python model '{model}_0_0' is using the decoupled mode and "
        "the execute function must return None."
    ), message
    serves_on_decoupled = stream(sender_server, model, ["pre=2,pre_final"], 2)
    assert indexes(serves_on_decoupled) == [1000, 1001]


@pytest.mark.parametrize("model", ["sender_rules_decoupled", "sender_rules_decoupled_async"])
def test_decoupled_send_after_the_final_flag_raises_closed(
    sender_server: TritonServer, model: str
) -> None:
    marker = f'send raised: {CLOSED}"'  # all of it: the log quotes it
    before = sender_server.log().count(marker)
    answers = stream(sender_server, model, ["pre=1,pre_final,post=1"], 1)
    assert indexes(answers) == [1000]
    wait_for_log(sender_server, marker, before)
