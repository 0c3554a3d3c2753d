# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Exception barriers and sends (docs/hardening.md): a stub that stops
reading, a flood of MODEL_CONTROL frames, and exceptions inside the backend
(injected with TRITONPY_TEST_FAULT) cost that stub or that request, never
the server: tritonserver stays live and ready and add_sub serves on."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from checks import ask, server_is_well, wait_for_new_stub
from server import (
    TritonServer,
    build_repository,
    eventually,
    explicit,
    load_failure,
    running,
    wait_until,
)

MODEL = "hostile_barriers"

QUEUE_BYTES = 131072  # the smallest stub-send-queue-bytes: one frame


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("hostile_barriers")
    repo = build_repository(work / "repo", ["add_sub", "hostile_barriers", "hostile_barriers_slow"])
    srv = TritonServer(
        repo,
        work,
        args=[
            "--model-control-mode=explicit",
            "--load-model=add_sub",
            "--load-model=hostile_barriers",
            f"--backend-config=tritonpy,stub-send-queue-bytes={QUEUE_BYTES}",
        ],
    )
    with running(srv):
        yield srv


FAULTS = ",".join(
    [
        "hostile_barriers:BLS_REQUEST",  # its reader, handling that frame
        "identity:execute",
        "hostile_barriers_slow:model-initialize",
        "add_sub:BLS_RESPONSE",  # a BLS call's response, on add_sub's thread
    ]
)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """A server whose backend throws std::bad_alloc at the named points."""
    work = tmp_path_factory.mktemp("hostile_faults")
    models = ["add_sub", "hostile_barriers", "identity", "bls_loader", "bls_add_sub"]
    srv = TritonServer(
        build_repository(work / "repo", [*models, "hostile_barriers_slow"]),
        work,
        args=[
            *explicit(models),
            "--backend-config=tritonpy,stub-model-control=false",
        ],
        prefix=["env", f"TRITONPY_TEST_FAULT={FAULTS}"],
    )
    with running(srv):
        yield srv


def client(srv: TritonServer, timeout: float = 120) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(srv.http_url, network_timeout=timeout)


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


READER = "tritonpy-reader"  # one per live stub; a dead stub's may take a while to end


def state(srv: TritonServer, model: str) -> str | None:
    """``model``'s state in the repository index (READY, LOADING, ...)."""
    status, body = srv.request("POST", "/v2/repository/index", b"{}")
    assert status == 200, body
    return next((m.get("state") for m in json.loads(body) if m["name"] == model), None)


def non_readers(pid: int) -> int:
    """``pid``'s threads other than stubs' readers."""
    count = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                count += f.read().strip() != READER
        except OSError:  # ended meanwhile
            pass
    return count


def fd_inodes(pid: int) -> dict[int, str]:
    """The inode of each file ``pid`` holds a descriptor of, and its link."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{fd}"
        try:
            out[os.stat(path).st_ino] = os.readlink(path)
        except OSError:  # closed meanwhile
            pass
    return out


def socket_peer(server: int, stub: int) -> set[int]:
    """The server's end of the live stub's socket (``ss`` names each Unix
    socket's peer by inode)."""
    own = {str(ino) for ino, link in fd_inodes(stub).items() if link.startswith("socket:")}
    peers = set()
    for line in subprocess.run(["ss", "-xaH"], capture_output=True, text=True).stdout.splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[5] in own:
            peers.add(int(fields[7]))
    return peers & set(fd_inodes(server))


def mapped_arenas(pid: int) -> set[int]:
    """The inodes of the arenas (memfds) ``pid`` has mapped."""
    with open(f"/proc/{pid}/maps") as f:
        rows = [line.split(maxsplit=5) for line in f]
    return {int(r[4]) for r in rows if len(r) == 6 and r[5].startswith("/memfd:tritonpy")}


def orphaned_arenas(srv: TritonServer) -> set[int]:
    """Arenas the server maps that no live stub maps too: each is shared by
    the server and one stub, so these are a dead stub's."""
    live = set()
    for pid in srv.stubs():
        try:
            live |= mapped_arenas(pid)
        except OSError:  # gone meanwhile
            pass
    return mapped_arenas(srv.proc.pid) - live


def test_a_stub_that_stops_reading_is_killed_and_others_serve_on(server: TritonServer) -> None:
    """The hostile stub asks add_sub for thousands of BLS calls and never
    reads the answers. add_sub's own threads send those answers: they must
    not block on the full socket. The stub is killed once its queue passes
    stub-send-queue-bytes."""
    old = ask(server, "ok", MODEL)
    peer = socket_peer(server.proc.pid, old)
    assert peer, "the server holds no socket of the stub?"
    assert not orphaned_arenas(server)  # so that any after the attack are the dead stub's
    with pytest.raises(InferenceServerException) as e:
        ask(server, "stall", MODEL)
    msg = str(e.value)
    assert "model 'hostile_barriers'" in msg and "stub-send-queue-bytes" in msg, msg
    assert "stopped reading" in msg, msg
    server_is_well(server)
    assert wait_for_new_stub(server, old, model=MODEL) != old
    # Nothing held for the dead stub: its socket and arenas (its queued
    # frames with them). add_sub may still be answering the dead stub's
    # thousands of BLS calls, so this may take a while.
    wait_until(
        lambda: not peer & set(fd_inodes(server.proc.pid)) and not orphaned_arenas(server),
        timeout=120,
    )


def test_a_flood_of_model_control_frames_kills_the_stub(server: TritonServer) -> None:
    """One worker per stub runs MODEL_CONTROL requests; a stub with more
    than the bound in flight is killed, and the backend starts no thread per
    frame."""
    old = ask(server, "ok", MODEL)
    before = threads(server.proc.pid)
    others_before = non_readers(server.proc.pid)
    with pytest.raises(InferenceServerException) as e:
        ask(server, "flood", MODEL)
    msg = str(e.value)
    assert "model 'hostile_barriers'" in msg and "protocol violation" in msg, msg
    assert "MODEL_CONTROL requests in flight" in msg, msg
    # Right away, while the loads the frames asked for would still run (one
    # takes seconds): the worker at most, not one per frame. Stubs' readers
    # aside: the dead stub's may still be ending, the new one's starting.
    assert non_readers(server.proc.pid) <= others_before + 2
    server_is_well(server)
    assert wait_for_new_stub(server, old, model=MODEL) != old

    # The frames' first load may have gone through (its threads are
    # hostile_barriers_slow's own, not the flood's): it is unloaded again.
    slow = "hostile_barriers_slow"
    wait_until(lambda: state(server, slow) != "LOADING", timeout=60)
    if state(server, slow) == "READY":
        assert server.request("POST", f"/v2/repository/models/{slow}/unload")[0] == 200
        wait_until(lambda: state(server, slow) == "UNAVAILABLE", timeout=60)

    # Once the dead stub's reader has ended: the worker and the restarted
    # stub's reader at most.
    def few_threads() -> None:
        assert threads(server.proc.pid) <= before + 2

    eventually(few_threads, timeout=60)


def test_an_exception_handling_a_frame_kills_only_that_stub(faulty: TritonServer) -> None:
    old = ask(faulty, "ok", MODEL)
    with pytest.raises(InferenceServerException) as e:
        ask(faulty, "bls", MODEL)
    msg = str(e.value)
    assert "model 'hostile_barriers'" in msg, msg
    assert "handling a frame from the stub: out of memory (std::bad_alloc)" in msg, msg
    server_is_well(faulty)
    assert wait_for_new_stub(faulty, old, model=MODEL) != old


def test_an_exception_in_execute_fails_that_request(faulty: TritonServer) -> None:
    c = client(faulty)
    try:
        t = httpclient.InferInput("IN_INT32", [2], "INT32")
        t.set_data_from_numpy(np.array([1, 2], np.int32))
        with pytest.raises(InferenceServerException) as e:
            c.infer("identity", [t])
    finally:
        c.close()
    assert "tritonpy: execute: out of memory (std::bad_alloc)" in str(e.value), str(e.value)
    server_is_well(faulty)


def test_an_exception_in_a_bls_callback_fails_that_call(faulty: TritonServer) -> None:
    """The response callback of a BLS call runs on the called model's
    thread (add_sub's reader): its exception ends the call with an error,
    and add_sub and the caller's stub serve on."""
    c = client(faulty)
    try:
        ins = []
        for name in ("INPUT0", "INPUT1"):
            t = httpclient.InferInput(name, [4], "FP32")
            t.set_data_from_numpy(np.ones(4, np.float32))
            ins.append(t)
        with pytest.raises(InferenceServerException) as e:
            c.infer("bls_add_sub", ins)
    finally:
        c.close()
    assert "tritonpy: BLS response: out of memory (std::bad_alloc)" in str(e.value), str(e.value)
    server_is_well(faulty)


def test_the_model_loading_api_can_be_turned_off(faulty: TritonServer) -> None:
    c = client(faulty)

    def loader(op: str) -> bool:
        ins = []
        for key, value in (("OP", op), ("NAME", "add_sub")):
            t = httpclient.InferInput(key, [1], "BYTES")
            t.set_data_from_numpy(np.array([value.encode()], object))
            ins.append(t)
        return bool(c.infer("bls_loader", ins).as_numpy("READY")[0])

    try:
        assert loader("ready") is True  # readiness is still answered
        for op in ("load", "unload"):
            with pytest.raises(InferenceServerException) as e:
                loader(op)
            assert "the model loading API is turned off" in str(e.value), str(e.value)
            assert "stub-model-control=false" in str(e.value), str(e.value)
    finally:
        c.close()
    assert faulty.model_ready("add_sub")
    server_is_well(faulty)


def test_an_exception_in_model_initialize_fails_that_load(faulty: TritonServer) -> None:
    msg = load_failure(faulty, "hostile_barriers_slow")
    assert "tritonpy: model initialize: out of memory (std::bad_alloc)" in msg, msg
    server_is_well(faulty, ready=False)  # a failed load: not ready
