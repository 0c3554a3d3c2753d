# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Defaults for streaming: a decoupled `async def execute` model with no
max_inflight_batches in its config takes stream 129 and later while the
first 128 are still running, instead of holding them in Triton's queue
until a whole stream ends."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc.aio as aioclient

from server import TritonServer

# Each stream sends one token at once, then waits until a request with
# RELEASE true arrives; only then do the streams send their final token.
HELD = """
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def token(i):
    return pb_utils.InferenceResponse([pb_utils.Tensor("TOKEN", np.array([i], np.int32))])


class TritonPythonModel:
    def initialize(self, args):
        self.release = asyncio.Event()

    async def execute(self, requests):
        await asyncio.gather(*(self.one(r) for r in requests))

    async def one(self, request):
        sender = request.get_response_sender()
        if pb_utils.get_input_tensor_by_name(request, "RELEASE").as_numpy().reshape(-1)[0]:
            self.release.set()
            sender.send(token(0), flags=FINAL)
            return
        sender.send(token(1))
        await self.release.wait()
        sender.send(token(2), flags=FINAL)
"""

CONFIG = """
name: "held"
backend: "tritonpy"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "RELEASE", data_type: TYPE_BOOL, dims: [ 1 ] } ]
output [ { name: "TOKEN", data_type: TYPE_INT32, dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""

# One more than the default-mode bound of batches in flight (128).
STREAMS = 129


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("stream_defaults")
    model = work / "repo" / "held"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(textwrap.dedent(HELD))
    (model / "config.pbtxt").write_text(CONFIG)
    server = TritonServer(work / "repo", work)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop_after_cancelled_streams()


def request(release: bool) -> dict:
    x = aioclient.InferInput("RELEASE", [1], "BOOL")
    x.set_data_from_numpy(np.array([release], bool))
    return {"model_name": "held", "inputs": [x]}


def test_decoupled_default_takes_streams_past_128_while_earlier_ones_run(
    srv: TritonServer,
) -> None:
    async def stream(client, release: bool, tokens: list[int], first: asyncio.Event) -> None:
        async def requests():
            yield request(release)

        async for result, error in client.stream_infer(requests()):
            assert error is None, error
            tokens.append(int(result.as_numpy("TOKEN")[0]))
            first.set()
            if tokens[-1] != 1:
                return

    async def main() -> None:
        async with aioclient.InferenceServerClient(srv.grpc_url) as client:
            got: list[list[int]] = [[] for _ in range(STREAMS)]
            firsts = [asyncio.Event() for _ in range(STREAMS)]
            tasks = [
                asyncio.create_task(stream(client, False, got[i], firsts[i]))
                for i in range(STREAMS)
            ]
            try:
                try:
                    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in firsts)), 60)
                except asyncio.TimeoutError:
                    waiting = sum(not e.is_set() for e in firsts)
                    pytest.fail(
                        f"{waiting} of {STREAMS} streams got no first token while the "
                        "others were still running"
                    )
                # Every stream is still running: none has had its final token.
                assert all(g == [1] for g in got), got
                assert not any(t.done() for t in tasks)
                done: list[int] = []
                await asyncio.wait_for(stream(client, True, done, asyncio.Event()), 60)
                assert done == [0]
                await asyncio.wait_for(asyncio.gather(*tasks), 60)
                assert all(g == [1, 2] for g in got), got
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
