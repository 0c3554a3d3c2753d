# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""tritonpy.batching in models served by a real tritonserver, on tritonpy
and on the official backend (which gets a copy of the package beside the
model): continuous batching (slots, budget, cancellation) and @batched."""

from __future__ import annotations

import json
import queue
import shutil
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from server import TritonServer, build_repository, official_server

MODELS = ["continuous_steps", "micro_batched"]
BATCHING = Path(__file__).resolve().parents[2] / "src" / "tritonpy" / "batching"


@pytest.fixture(scope="module", params=["tritonpy", "official"])
def srv(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp(request.param)
    repo = build_repository(work / "repo", MODELS)
    if request.param == "official":
        for model in MODELS:
            config = repo / model / "config.pbtxt"
            config.write_text(
                config.read_text().replace('backend: "tritonpy"', 'backend: "python"')
            )
            # The official stub puts the version directory on sys.path.
            dest = repo / model / "1" / "tritonpy"
            shutil.copytree(BATCHING, dest / "batching")
            (dest / "__init__.py").write_text("")
        server = official_server(work, [])
    else:
        server = TritonServer(repo, work)
    try:
        server.wait_ready(timeout=180)
        yield server
    finally:
        server.stop_after_cancelled_streams()


def generate(srv: TritonServer, model: str, body: dict) -> dict:
    """One request through /generate (a decoupled model's single response)."""
    req = urllib.request.Request(
        f"http://{srv.http_url}/v2/models/{model}/generate",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


class Streams:
    """gRPC streams of continuous_steps on one connection, by request id."""

    def __init__(self, srv: TritonServer) -> None:
        self.client = grpcclient.InferenceServerClient(srv.grpc_url)
        self.results: queue.Queue = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.results.put((result, error)))

    def start(self, rid: str, count: int, cost: int = 1) -> None:
        inputs = [
            grpcclient.InferInput("COUNT", [1], "INT32"),
            grpcclient.InferInput("COST", [1], "INT32"),
        ]
        inputs[0].set_data_from_numpy(np.array([count], np.int32))
        inputs[1].set_data_from_numpy(np.array([cost], np.int32))
        self.client.async_stream_infer(
            "continuous_steps", inputs, request_id=rid, enable_empty_final_response=True
        )

    def next(self, timeout: float = 60) -> tuple[str, dict | None]:
        """(request id, {output: value}), or (request id, None) at its end."""
        result, error = self.results.get(timeout=timeout)
        assert error is None, error
        resp = result.get_response()
        if resp.parameters["triton_final_response"].bool_param:
            return resp.id, None
        return resp.id, {o.name: int(result.as_numpy(o.name)[0]) for o in resp.outputs}

    def run(self, streams: dict[str, int], cost: int = 1) -> dict[str, list[dict]]:
        for rid, count in streams.items():
            self.start(rid, count, cost)
        return self.collect(set(streams))

    def collect(self, streams: set[str]) -> dict[str, list[dict]]:
        """The outputs of ``streams`` (started), once each has ended."""
        got: dict[str, list[dict]] = {rid: [] for rid in streams}
        open_ = set(streams)
        while open_:
            rid, out = self.next()
            if out is None:
                open_.remove(rid)
            else:
                got[rid].append(out)
        return got

    def close(self, cancel: bool = False) -> None:
        self.client.stop_stream(cancel_requests=cancel)
        self.client.close()


def wait_status(srv: TritonServer, active: int, waiting: int, deadline: float = 60) -> None:
    """Waits until the batcher holds ``active`` streams and ``waiting``."""
    end = time.monotonic() + deadline
    while True:
        status = generate(srv, "continuous_steps", {"COUNT": 0})
        if (status["ACTIVE"], status["WAITING"]) == (active, waiting):
            return
        assert time.monotonic() < end, f"{status}, not {active} active, {waiting} waiting"
        time.sleep(0.05)


def wait_idle(srv: TritonServer, deadline: float = 30) -> dict:
    end = time.monotonic() + deadline
    while True:
        status = generate(srv, "continuous_steps", {"COUNT": 0})
        if (status["ACTIVE"], status["WAITING"]) == (0, 0) or time.monotonic() > end:
            return status
        time.sleep(0.05)


def test_streams_share_steps_up_to_max_active_and_the_rest_wait(srv: TritonServer) -> None:
    """Ten streams of 5 to 14 steps, all there while the first one's first
    step is held (the model's hold file): once it is let go, four at a time
    run."""
    hold = srv.repo / "continuous_steps" / "hold"
    hold.touch()
    s = Streams(srv)
    try:
        s.start("s0", 5)
        wait_status(srv, active=1, waiting=0)  # s0 in its first step, held
        for i in range(1, 10):
            s.start(f"s{i}", 5 + i)
        wait_status(srv, active=1, waiting=9)
        hold.unlink()
        got = s.collect({f"s{i}" for i in range(10)})
    finally:
        hold.unlink(missing_ok=True)
        s.close()
    for i in range(10):
        assert [o["VALUE"] for o in got[f"s{i}"]] == list(range(5 + i))
    batches = [o["BATCH"] for outs in got.values() for o in outs]
    # max_active is 4: never more in a step, and waiting streams were served.
    assert max(batches) == 4
    # A stream's outputs come from consecutive steps: it never skips one.
    for outs in got.values():
        steps = [o["STEP"] for o in outs]
        assert steps == list(range(steps[0], steps[0] + len(steps)))


def test_a_stream_joins_a_running_batch(srv: TritonServer) -> None:
    s = Streams(srv)
    try:
        s.start("long", 400)
        first = s.next()
        assert first[0] == "long"
        s.start("short", 3)
        short = []
        while len(short) < 3:
            rid, out = s.next()
            if rid == "short" and out is not None:
                short.append(out)
    finally:
        s.close(cancel=True)
    # short ran beside long (which had 400 steps of 2 ms to go), in
    # consecutive steps.
    assert [o["BATCH"] for o in short] == [2, 2, 2]
    assert [o["STEP"] for o in short] == list(range(short[0]["STEP"], short[0]["STEP"] + 3))
    assert wait_idle(srv)["ACTIVE"] == 0


def test_cache_budget_admits_streams_by_cost(srv: TritonServer) -> None:
    """Budget 100. Streams that run until cancelled hold their cost while
    the others come: a second stream of cost 60 waits for the first; two
    of cost 30 leave room for a third, not a fourth."""
    endless = Streams(srv)
    s = Streams(srv)
    try:
        endless.start("h0", 10**8, cost=60)
        assert endless.next()[0] == "h0"
        s.start("h1", 4, cost=60)
        wait_status(srv, active=1, waiting=1)
        endless.close(cancel=True)
        heavy = s.collect({"h1"})
        wait_idle(srv)
        endless = Streams(srv)
        for rid in ("l0", "l1"):
            endless.start(rid, 10**8, cost=30)
        wait_status(srv, active=2, waiting=0)
        light = s.run({"l2": 4, "l3": 4}, cost=30)
    finally:
        endless.close(cancel=True)
        s.close()
    assert wait_idle(srv)["ACTIVE"] == 0
    assert [o["BATCH"] for o in heavy["h1"]] == [1] * 4
    # Beside the two that hold 60, one of cost 30 at a time: each ran in
    # steps of three streams, and one's steps all came after the other's.
    assert [o["BATCH"] for outs in light.values() for o in outs] == [3] * 8
    first, second = sorted(light.values(), key=lambda outs: outs[0]["STEP"])
    assert first[-1]["STEP"] < second[0]["STEP"], light


def test_grpc_cancel_frees_the_slot(srv: TritonServer) -> None:
    s = Streams(srv)
    try:
        s.start("endless", 10**8)
        for _ in range(3):
            assert s.next()[0] == "endless"
        assert generate(srv, "continuous_steps", {"COUNT": 0})["ACTIVE"] == 1
    finally:
        s.close(cancel=True)
    assert wait_idle(srv) == {**wait_idle(srv), "ACTIVE": 0, "WAITING": 0}
    # The slot serves the next stream.
    s = Streams(srv)
    try:
        got = s.run({"after": 3})
    finally:
        s.close()
    assert [o["VALUE"] for o in got["after"]] == [0, 1, 2]


def test_batched_gathers_concurrent_requests(srv: TritonServer) -> None:
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda x: generate(srv, "micro_batched", {"X": x}), range(8)))
    assert [o["Y"] for o in outs] == [2 * x for x in range(8)]
    sizes = [o["SIZE"] for o in outs]
    # max_size 4, and 8 requests sent at once, within max_wait (2 s) of one
    # another even on a busy machine, at least share some batches.
    assert max(sizes) <= 4 and max(sizes) > 1


def test_batched_error_fails_its_batch_only(srv: TritonServer) -> None:
    bad = generate(srv, "micro_batched", {"X": -1})
    assert "negative input in batch [-1]" in bad["error"]
    assert generate(srv, "micro_batched", {"X": 21})["Y"] == 42
