# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""auto_complete_config through a real tritonserver: what models complete
is the config Triton serves (GET v2/models/<m>/config) and uses, a model
with no config.pbtxt at all serves, failures fail the load with the
reason, --disable-auto-complete-config is honoured, and the auto_complete
example's client passes."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import (
    TritonServer,
    build_repository,
    explicit,
    load_failure,
    run_example_client,
    running,
)

START = ["auto_complete_batch", "auto_complete_nobatch", "ac_decoupled", "ac_batch_cap"]
FAILING = ["ac_conflict", "ac_raises", "ac_refused", "ac_crash"]


def make_server(
    tmp_path_factory: pytest.TempPathFactory, name: str, start: list[str], *extra: str
) -> TritonServer:
    work = tmp_path_factory.mktemp(name)
    repo = build_repository(work / "repo", START + FAILING)
    args = [*explicit(start), *extra]
    return TritonServer(repo, work, args=args)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    srv = make_server(tmp_path_factory, "autocomplete", START)
    with running(srv):
        yield srv


def config_of(srv: TritonServer, model: str) -> dict:
    c = httpclient.InferenceServerClient(srv.http_url)
    try:
        return c.get_model_config(model)
    finally:
        c.close()


def tensors(config: dict, section: str) -> dict[str, tuple[str, list[int]]]:
    return {t["name"]: (t["data_type"], [int(d) for d in t["dims"]]) for t in config[section]}


def load_error(srv: TritonServer, model: str) -> str:
    message = load_failure(srv, model)
    c = httpclient.InferenceServerClient(srv.http_url)
    try:
        index = {m["name"]: m for m in c.get_model_repository_index()}
    finally:
        c.close()
    # The repository index keeps the reason for the client that asks later.
    assert index[model]["state"] == "UNAVAILABLE" and model in index[model]["reason"]
    return message


# ------------------------------------------------------------------ completed configs


def test_batching_completion_is_the_served_config(server: TritonServer) -> None:
    config = config_of(server, "auto_complete_batch")
    assert config["backend"] == "tritonpy"
    assert config["max_batch_size"] == 16
    assert "dynamic_batching" in config
    assert tensors(config, "input") == {"A": ("TYPE_FP32", [3]), "B": ("TYPE_FP32", [3])}
    assert tensors(config, "output") == {"DOT": ("TYPE_FP32", [1]), "MAX": ("TYPE_FP32", [3])}
    # Triton batches with it: two rows in one request, under max_batch_size.
    c = httpclient.InferenceServerClient(server.http_url)
    try:
        a = np.array([[1, 2, 3], [0, -1, 4]], np.float32)
        b = np.array([[4, 5, 6], [1, 1, 1]], np.float32)
        ins = [httpclient.InferInput(n, [2, 3], "FP32") for n in ("A", "B")]
        ins[0].set_data_from_numpy(a)
        ins[1].set_data_from_numpy(b)
        res = c.infer("auto_complete_batch", ins)
        assert res.as_numpy("DOT").tolist() == [[32.0], [3.0]]
        too_many = [httpclient.InferInput(n, [17, 3], "FP32") for n in ("A", "B")]
        for t in too_many:
            t.set_data_from_numpy(np.zeros((17, 3), np.float32))
        with pytest.raises(InferenceServerException, match="batch-size must be <= 16"):
            c.infer("auto_complete_batch", too_many)
    finally:
        c.close()


def test_config_less_model_serves(server: TritonServer) -> None:
    assert not (server.repo / "auto_complete_nobatch" / "config.pbtxt").exists()
    config = config_of(server, "auto_complete_nobatch")
    assert config["name"] == "auto_complete_nobatch" and config["backend"] == "python"
    assert config["max_batch_size"] == 0 and "dynamic_batching" not in config
    assert tensors(config, "input") == {"WORDS": ("TYPE_STRING", [-1])}
    assert tensors(config, "output") == {
        "UPPER": ("TYPE_STRING", [-1]),
        "LENGTHS": ("TYPE_INT32", [-1]),
    }
    c = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        inp = grpcclient.InferInput("WORDS", [2], "BYTES")
        inp.set_data_from_numpy(np.array([b"ab", b"xyz"], dtype=object))
        res = c.infer("auto_complete_nobatch", [inp])
        assert res.as_numpy("UPPER").tolist() == [b"AB", b"XYZ"]
        assert res.as_numpy("LENGTHS").tolist() == [2, 3]
    finally:
        c.close()


def test_decoupled_policy_from_auto_complete_streams(server: TritonServer) -> None:
    config = config_of(server, "ac_decoupled")
    assert config["model_transaction_policy"]["decoupled"] is True
    results: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(server.grpc_url)
    c.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        inp = grpcclient.InferInput("N", [1], "INT32")
        inp.set_data_from_numpy(np.array([3], np.int32))
        c.async_stream_infer("ac_decoupled", [inp], enable_empty_final_response=True)
        got = []
        while True:
            result, error = results.get(timeout=30)
            assert error is None, error
            if result.get_response().outputs:
                got.append(int(result.as_numpy("I")[0]))
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
        assert got == [1, 2, 3]
    finally:
        c.stop_stream()
        c.close()


def test_smaller_max_batch_size_in_config_pbtxt_stands(server: TritonServer) -> None:
    config = config_of(server, "ac_batch_cap")
    assert config["max_batch_size"] == 2 and "dynamic_batching" in config
    assert (server.repo / "ac_batch_cap" / "1" / "auto_complete_called").exists()


# ------------------------------------------------------------------ failures


def test_conflicting_completion_fails_the_load(server: TritonServer) -> None:
    msg = load_error(server, "ac_conflict")
    assert "model 'ac_conflict'" in msg
    assert "input 'X' data_type TYPE_INT32, the model TYPE_FP32" in msg, msg


def test_raising_auto_complete_fails_the_load_with_the_exception(server: TritonServer) -> None:
    msg = load_error(server, "ac_raises")
    assert "model 'ac_raises'" in msg and "auto_complete_config failed" in msg
    assert "RuntimeError: cannot read the weights header to size the inputs" in msg, msg
    assert "read_header" in msg  # the traceback
    # What the model logged before it raised is in the server's log.
    assert "ac_raises: looking for the weights header" in server.log()


def test_config_triton_refuses_fails_the_load(server: TritonServer) -> None:
    msg = load_error(server, "ac_refused")
    assert "model 'ac_refused'" in msg
    assert "Triton refused the config completed by auto_complete_config" in msg, msg


def test_stub_dying_in_auto_complete_fails_the_load(server: TritonServer) -> None:
    msg = load_error(server, "ac_crash")
    assert "model 'ac_crash'" in msg and "running auto_complete_config" in msg, msg
    assert "before sending AUTO_COMPLETE_DONE" in msg and "exited with status 3" in msg, msg


def test_failed_loads_leave_no_stub_behind(server: TritonServer) -> None:
    before = set(server.stubs())
    for model in FAILING:
        load_error(server, model)
    assert set(server.stubs()) <= before


def test_config_less_model_completes_as_on_the_official_backend(
    server: TritonServer, official_examples: TritonServer
) -> None:
    theirs = config_of(official_examples, "auto_complete_nobatch")
    ours = config_of(server, "auto_complete_nobatch")
    for key in ("name", "backend", "max_batch_size", "input", "output", "instance_group"):
        assert ours[key] == theirs[key], key


# ------------------------------------------------------------------ the example


def test_example_client(server: TritonServer) -> None:
    out = run_example_client("auto_complete", "--http", server.http_url, oks=4)
    assert "no config.pbtxt" in out


# ------------------------------------------------------------------ disabled


def test_disable_auto_complete_config_is_honoured(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    srv = make_server(
        tmp_path_factory, "no-autocomplete", ["ac_batch_cap"], "--disable-auto-complete-config"
    )
    try:
        srv.wait_ready()
        config = config_of(srv, "ac_batch_cap")
        assert config["max_batch_size"] == 2 and "dynamic_batching" not in config
        assert not (Path(srv.repo) / "ac_batch_cap" / "1" / "auto_complete_called").exists()
        # auto_complete_config is not called, so what it would refuse
        # loads as its config.pbtxt says.
        c = httpclient.InferenceServerClient(srv.http_url)
        try:
            c.load_model("ac_conflict")
        finally:
            c.close()
        assert tensors(config_of(srv, "ac_conflict"), "input") == {"X": ("TYPE_INT32", [2])}
        # Without config.pbtxt and without completion, Triton cannot load
        # the model.
        msg = load_failure(srv, "auto_complete_nobatch")
        assert "failed to load 'auto_complete_nobatch'" in msg, msg
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]
