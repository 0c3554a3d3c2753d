# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The C++ backend's side of the engine, through a real tritonserver:
the in-flight bound of async instances (max_inflight_batches), its
validation, sync decoupled execute, and stub death with streams and async
batches in flight."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository, sample, scrape, wait_gone

# Probes (negative SLEEP_MS) answer in PID: -1 how many requests are asleep
# now, -2 the most that ever were at once, -3 wakes every sleeper.
SLEEPY = """
import asyncio, os
import numpy as np
import triton_python_backend_utils as pb_utils

SLEEPING = 0
MOST = 0
WAKE = None

class TritonPythonModel:
    async def execute(self, requests):
        global SLEEPING, MOST, WAKE
        if WAKE is None:
            WAKE = asyncio.Event()
        out = []
        for r in requests:
            ms = float(pb_utils.get_input_tensor_by_name(r, "SLEEP_MS").as_numpy()[0])
            if ms < 0:
                if ms == -3:
                    WAKE.set()
                    WAKE = asyncio.Event()
                out.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor("PID", np.array([MOST if ms == -2 else SLEEPING], np.int64))]))
                continue
            SLEEPING += 1
            MOST = max(MOST, SLEEPING)
            try:
                await asyncio.wait_for(WAKE.wait(), ms / 1000)
            except asyncio.TimeoutError:
                pass
            finally:
                SLEEPING -= 1
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))]))
        return out
"""

SLEEPY_CONFIG = """
name: "{name}"
backend: "tritonpy"
max_batch_size: 0
input [ {{ name: "SLEEP_MS", data_type: TYPE_FP32, dims: [ 1 ] }} ]
output [ {{ name: "PID", data_type: TYPE_INT64, dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU, count: 1 }} ]
{extra}
"""

# Sync decoupled execute: returns at once, a thread streams the tokens.
THREADED = """
import threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])
            sender = r.get_response_sender()
            threading.Thread(target=self._stream, args=(sender, n), daemon=True).start()
        return None

    def _stream(self, sender, n):
        for i in range(n):
            time.sleep(0.02)
            sender.send(pb_utils.InferenceResponse(
                [pb_utils.Tensor("I", np.array([i], np.int32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

THREADED_CONFIG = """
name: "threaded"
backend: "tritonpy"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "N", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "I", data_type: TYPE_INT32, dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""


# Sync execute that must never overlap itself: a second execute() entering
# while one runs answers with an error. SLEEP_MS >= 1000 makes the stub die
# mid-execute, once the test has made the file "go" beside the model (it
# logs that it waits for it).
SERIAL = """
import os, signal, time
import numpy as np
import triton_python_backend_utils as pb_utils

GO = os.path.join(os.path.dirname(__file__), "go")

class TritonPythonModel:
    def initialize(self, args):
        self.running = False
        self.count = 0
        self.name = args["model_name"]

    def execute(self, requests):
        if self.running:
            raise RuntimeError("execute() overlapped")
        self.running = True
        try:
            out = []
            for r in requests:
                ms = float(pb_utils.get_input_tensor_by_name(r, "SLEEP_MS").as_numpy()[0])
                if ms >= 1000:
                    pb_utils.Logger.log_info(f"serial: '{self.name}' dies once told")
                    deadline = time.monotonic() + 120
                    while not os.path.exists(GO) and time.monotonic() < deadline:
                        time.sleep(0.01)
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(ms / 1000)
                self.count += 1
                out.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor("PID", np.array([self.count], np.int64))]))
            return out
        finally:
            self.running = False
"""


def prefetch(n: str) -> str:
    return f'parameters {{ key: "sync_prefetch_batches" value {{ string_value: "{n}" }} }}'


def inflight(n: str) -> str:
    return f'parameters {{ key: "max_inflight_batches" value {{ string_value: "{n}" }} }}'


def write_model(repo: Path, name: str, code: str, config: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(textwrap.dedent(code))
    (repo / name / "config.pbtxt").write_text(config)


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("backend_engine")
    repo = work / "repo"
    write_model(repo, "sleepy", SLEEPY, SLEEPY_CONFIG.format(name="sleepy", extra=""))
    write_model(
        repo, "sleepy_one", SLEEPY, SLEEPY_CONFIG.format(name="sleepy_one", extra=inflight("1"))
    )
    write_model(
        repo, "sleepy_bad", SLEEPY, SLEEPY_CONFIG.format(name="sleepy_bad", extra=inflight("zero"))
    )
    write_model(repo, "threaded", THREADED, THREADED_CONFIG)
    for name, extra in (
        ("serial", ""),
        ("serial_p0", prefetch("0")),
        ("serial_p1", prefetch("1")),
        ("serial_p4", prefetch("4")),
        ("serial_bad", prefetch("65")),
    ):
        write_model(repo, name, SERIAL, SLEEPY_CONFIG.format(name=name, extra=extra))
    # Inputs of 12 MiB: past the first batch ahead, no more than 16 MiB of
    # arena inputs go ahead.
    big = SLEEPY_CONFIG.format(name="serial_big", extra="").replace(
        "input [ {",
        'input [ { name: "BLOB", data_type: TYPE_UINT8, dims: [ -1 ] }, {',
    )
    write_model(repo, "serial_big", SERIAL, big)
    # Where the default is 1 batch ahead, not 16: several instances, or a
    # batcher that should get to form its batches.
    two = SLEEPY_CONFIG.format(name="serial_two", extra="").replace("count: 1", "count: 2")
    write_model(repo, "serial_two", SERIAL, two)
    dyn = SLEEPY_CONFIG.format(name="serial_dyn", extra="dynamic_batching { }")
    write_model(repo, "serial_dyn", SERIAL, dyn.replace("max_batch_size: 0", "max_batch_size: 4"))
    server = TritonServer(
        repo,
        work,
        args=[
            "--model-control-mode=explicit",
            "--load-model=sleepy",
            "--load-model=sleepy_one",
            "--load-model=threaded",
            "--load-model=serial",
            "--load-model=serial_p0",
            "--load-model=serial_p1",
            "--load-model=serial_p4",
            "--load-model=serial_two",
            "--load-model=serial_dyn",
            "--load-model=serial_big",
            "--log-verbose=1",
        ],
    )
    try:
        server.wait_ready()
        yield server
    finally:
        stubs = server.stubs()
        assert server.stop() == 0, server.log()[-3000:]
        assert not wait_gone(stubs), "stubs outlived the server"


def probe(c: httpclient.InferenceServerClient, model: str, what: float) -> int:
    """A SLEEPY probe (-1 asleep now, -2 most at once, -3 wake them)."""
    return int(c.infer(model, sleep_input_sync(what)).as_numpy("PID")[0])


def sleep_input_sync(ms: float) -> list:
    x = httpclient.InferInput("SLEEP_MS", [1], "FP32")
    x.set_data_from_numpy(np.array([ms], np.float32))
    return [x]


def test_async_batches_overlap_up_to_the_bound(srv: TritonServer) -> None:
    """8 requests that would each sleep a minute are all asleep at once in
    one async instance (the model counts them); then a probe wakes them."""
    c = httpclient.InferenceServerClient(srv.http_url, concurrency=10, network_timeout=120)
    try:
        pending = [c.async_infer("sleepy", sleep_input_sync(60_000)) for _ in range(8)]
        deadline = time.monotonic() + 60
        while (asleep := probe(c, "sleepy", -1)) < 8:
            assert time.monotonic() < deadline, f"only {asleep} of 8 asleep at once"
            time.sleep(0.05)
        probe(c, "sleepy", -3)
        for p in pending:
            p.get_result()
    finally:
        c.close()


def test_max_inflight_batches_one_serialises(srv: TritonServer) -> None:
    """4 concurrent 300 ms requests with max_inflight_batches 1: the model
    never had two asleep at once."""

    async def run() -> None:
        async with httpaio.InferenceServerClient(srv.http_url) as c:
            await asyncio.gather(*(c.infer("sleepy_one", sleep_input(300)) for _ in range(4)))

    asyncio.run(run())
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=60)
    try:
        assert probe(c, "sleepy_one", -2) == 1
    finally:
        c.close()


@pytest.mark.parametrize(
    ("model", "param", "value"),
    [
        ("sleepy_bad", "max_inflight_batches", "zero"),
        ("serial_bad", "sync_prefetch_batches", "65"),
    ],
)
def test_bad_count_parameter_fails_the_load(
    srv: TritonServer, model: str, param: str, value: str
) -> None:
    c = httpclient.InferenceServerClient(srv.http_url)
    try:
        with pytest.raises(InferenceServerException) as e:
            c.load_model(model)
        msg = str(e.value)
        assert param in msg and value in msg and model in msg, msg
    finally:
        c.close()


def sleep_input(ms: float) -> list:
    x = httpaio.InferInput("SLEEP_MS", [1], "FP32")
    x.set_data_from_numpy(np.array([ms], np.float32))
    return [x]


@pytest.mark.parametrize(
    ("model", "ahead"),
    [("serial", 16), ("serial_p0", 0), ("serial_p1", 1), ("serial_two", 1), ("serial_dyn", 1)],
)
def test_batches_sent_ahead_by_default_and_when_set(
    srv: TritonServer, model: str, ahead: int
) -> None:
    """16 batches ahead for one instance under Triton's default scheduler, 1
    with several instances or a batcher, else what the parameter says."""
    line = f"tritonpy: model '{model}': sync_prefetch_batches {ahead},"
    assert line in srv.log(), [x for x in srv.log().splitlines() if "sync_prefetch" in x]


@pytest.mark.parametrize("model", ["serial", "serial_p0", "serial_p4"])
def test_sync_execute_never_overlaps(srv: TritonServer, model: str) -> None:
    """Batches sent ahead (sync_prefetch_batches) wait for execute() to
    return: 12 concurrent 50 ms requests run one after another."""

    async def run() -> tuple[float, list[int]]:
        async with httpaio.InferenceServerClient(srv.http_url) as c:
            start = time.monotonic()
            rs = await asyncio.gather(*(c.infer(model, sleep_input(50)) for _ in range(12)))
            return time.monotonic() - start, [int(r.as_numpy("PID")[0]) for r in rs]

    elapsed, counts = asyncio.run(run())
    assert len(set(counts)) == 12, counts  # each saw its own execute()
    assert elapsed >= 0.55, f"12 x 50 ms took {elapsed:.2f} s on a sync instance"


async def die_with_followers(
    srv: TritonServer,
    c: httpaio.InferenceServerClient,
    model: str,
    inputs: Callable[[float], list],
    followers: int,
    queued: int,
) -> list:
    """A SERIAL batch that holds its execute, ``followers`` requests sent
    behind it; once ``queued`` of them wait in Triton's queue and the
    backend's Execute waits for room with the rest (its verbose line), the
    held one kills its stub. All results, the held request's first."""
    mark = srv.log_size()
    first = asyncio.ensure_future(c.infer(model, inputs(1000)))
    held = f"serial: '{model}' dies once told"
    assert await asyncio.to_thread(srv.wait_log, held, 60, mark), srv.log()[mark:]
    rest = [asyncio.ensure_future(c.infer(model, inputs(10))) for _ in range(followers)]
    # Both, at once: a count alone may pass through `queued` while the
    # backend has not yet taken the batches it sends ahead.
    waits = f"model '{model}' instance '{model}_0_0': Execute waits for room ahead"
    deadline = time.monotonic() + 60
    while (
        now := sample(scrape(srv), "nv_inference_pending_request_count", model=model)
    ) != queued or waits not in srv.log()[mark:]:
        assert time.monotonic() < deadline, f"{now} requests queued in Triton, not {queued}"
        await asyncio.sleep(0.05)
    go = srv.repo / model / "1" / "go"
    go.touch()
    try:
        return await asyncio.gather(first, *rest, return_exceptions=True)
    finally:
        go.unlink()


@pytest.mark.parametrize(
    ("model", "ahead"),
    [("serial", 16), ("serial_p1", 1), ("serial_p4", 4)],
)
def test_stub_death_fails_the_batches_sent_ahead_too(
    srv: TritonServer, model: str, ahead: int
) -> None:
    """The running batch and the ones queued behind it in the stub fail with
    the death (16 by default for one instance without a batcher, else
    sync_prefetch_batches); the Execute that sent the last of them waits
    for room before it returns, so no request waits in the backend beyond
    those, and the ones still in Triton's queue go to the restarted stub.
    The stub dies once every follower the backend can take is taken: the
    rest wait in Triton's queue (its pending count)."""
    followers = 20
    taken = min(ahead, followers)

    async def run() -> tuple[Any, list]:
        async with httpaio.InferenceServerClient(srv.http_url) as c:
            return await die_with_followers(
                srv, c, model, sleep_input, followers, followers - taken
            )

    results = asyncio.run(run())
    failed = [r for r in results if isinstance(r, InferenceServerException)]
    assert results[0] in failed
    assert "died" in str(results[0]) and "SIGKILL" in str(results[0]), str(results[0])
    for r in failed:
        assert model in str(r), str(r)
    assert len(failed) == 1 + taken, [str(r) for r in results]
    deadline = time.monotonic() + 60
    c = httpclient.InferenceServerClient(srv.http_url)
    try:
        while True:
            try:
                x = httpclient.InferInput("SLEEP_MS", [1], "FP32")
                x.set_data_from_numpy(np.array([1], np.float32))
                assert int(c.infer(model, [x]).as_numpy("PID")[0]) >= 1
                break
            except InferenceServerException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        c.close()


def stream_threaded(server: TritonServer, n: int) -> list[int]:
    got: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        c.start_stream(callback=lambda result, error: got.put((result, error)))
        x = grpcclient.InferInput("N", [1], "INT32")
        x.set_data_from_numpy(np.array([n], np.int32))
        c.async_stream_infer("threaded", [x], enable_empty_final_response=True)
        seen = []
        while True:
            r, e = got.get(timeout=30)
            assert e is None, e
            resp = r.get_response()
            if resp.outputs:
                seen.append(int(r.as_numpy("I")[0]))
            if resp.parameters["triton_final_response"].bool_param:
                return seen
    finally:
        c.stop_stream()
        c.close()


def test_sync_decoupled_streams_after_execute_returned(srv: TritonServer) -> None:
    assert stream_threaded(srv, 10) == list(range(10))
    # The instance is free for the next request while the first streams.
    assert stream_threaded(srv, 3) == [0, 1, 2]


def test_stub_death_fails_streams_fast_and_recovers(srv: TritonServer) -> None:
    before = set(srv.stubs())
    errors: queue.Queue = queue.Queue()
    streaming: set[str] = set()

    def on_event(result: Any, error: Any) -> None:
        if error:
            errors.put((time.monotonic(), error))
        else:
            streaming.add(result.get_response().id)

    c = grpcclient.InferenceServerClient(srv.grpc_url)
    c.start_stream(callback=on_event)
    try:
        for i in range(3):
            x = grpcclient.InferInput("N", [1], "INT32")
            x.set_data_from_numpy(np.array([100000], np.int32))
            c.async_stream_infer("threaded", [x], request_id=f"s{i}")
        threaded = [
            p
            for p in before
            if "threaded" in open(f"/proc/{p}/cmdline", "rb").read().decode(errors="replace")
        ]
        assert len(threaded) == 1, threaded
        deadline = time.monotonic() + 60
        while len(streaming) < 3:  # every stream has sent a token
            assert time.monotonic() < deadline, f"streams {streaming} of 3 started"
            time.sleep(0.05)
        killed = time.monotonic()
        os.kill(threaded[0], signal.SIGKILL)
        msgs = []
        # The streams would run for half an hour: only the death can end
        # them within the wait.
        for _ in range(3):
            t, e = errors.get(timeout=60)
            msgs.append((t - killed, str(e)))
        print("stream errors after the death:", [f"{dt * 1000:.0f} ms" for dt, _ in msgs])
        assert all("signal 9" in m and "threaded" in m for _, m in msgs), msgs
    finally:
        c.stop_stream()
        c.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            assert stream_threaded(srv, 2) == [0, 1]
            break
        except (InferenceServerException, AssertionError):
            time.sleep(0.2)
    else:
        raise AssertionError("the restarted stub does not serve")


def test_stub_death_with_async_batches_in_flight(srv: TritonServer) -> None:
    x = httpclient.InferInput("SLEEP_MS", [1], "FP32")
    x.set_data_from_numpy(np.array([0], np.float32))
    h = httpclient.InferenceServerClient(srv.http_url, concurrency=8, network_timeout=60)
    try:
        pid = int(h.infer("sleepy", [x]).as_numpy("PID")[0])
        x.set_data_from_numpy(np.array([60000], np.float32))
        pending = [h.async_infer("sleepy", [x]) for _ in range(6)]
        probe = httpclient.InferInput("SLEEP_MS", [1], "FP32")
        probe.set_data_from_numpy(np.array([-1], np.float32))
        deadline = time.monotonic() + 30
        while int(h.infer("sleepy", [probe]).as_numpy("PID")[0]) < 6:
            assert time.monotonic() < deadline, "the six requests never all reached the stub"
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        # They would sleep a minute: the death ends them, as their errors say.
        for p in pending:
            with pytest.raises(InferenceServerException) as e:
                p.get_result()
            assert "signal 9" in str(e.value), str(e.value)
        deadline = time.monotonic() + 30
        x.set_data_from_numpy(np.array([0], np.float32))
        while time.monotonic() < deadline:
            try:
                assert int(h.infer("sleepy", [x]).as_numpy("PID")[0]) != pid
                break
            except InferenceServerException:
                time.sleep(0.2)
        else:
            raise AssertionError("no new stub")
    finally:
        h.close()


def test_bad_backend_setting_names_the_key(tmp_path: Path) -> None:
    """A setting out of range fails the backend's load (and so its models)
    with a message naming the key and the value."""
    srv = TritonServer(
        build_repository(tmp_path / "repo", ["add_sub"]),
        tmp_path,
        args=["--backend-config=tritonpy,stub-restart-limit=99999999"],
    )
    expected = "backend setting 'stub-restart-limit' is out of range: 99999999"
    try:
        deadline = time.monotonic() + 60
        while expected not in srv.log() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert expected in srv.log(), srv.log()[-2000:]
    finally:
        srv.stop()


def test_large_inputs_are_not_sent_far_ahead(srv: TritonServer) -> None:
    """With 12 MiB of inputs per request, one batch goes ahead of the
    running one (not 16): the Execute that sent it waits until the arena
    bytes ahead are under 16 MiB before it returns, so Triton keeps the
    rest. When the stub dies, the running batch and the one ahead fail;
    the other five go to the restarted stub."""
    followers = 6
    blob = np.zeros(12 << 20, np.uint8)

    def inputs(ms: float) -> list:
        x = sleep_input(ms)
        b = httpaio.InferInput("BLOB", [blob.size], "UINT8")
        b.set_data_from_numpy(blob, binary_data=True)
        return [b, *x]

    async def run() -> list:
        async with httpaio.InferenceServerClient(srv.http_url) as c:
            return await die_with_followers(srv, c, "serial_big", inputs, followers, followers - 1)

    results = asyncio.run(run())
    failed = [r for r in results if isinstance(r, InferenceServerException)]
    assert results[0] in failed and "died" in str(results[0]), str(results[0])
    assert len(failed) == 2, [str(r) for r in results]
