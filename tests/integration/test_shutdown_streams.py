# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A stream in flight when the server gets SIGTERM, or when its model is
unloaded through the model control API, runs to its end, as on the
official backend: Triton keeps a model whose requests are alive, and the
backend no longer cuts them. The stream (16 responses 0.5 s apart, sent
from a thread of the model's after execute() returned) outlasts the 5 s
that finalize-grace-seconds gave it before."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from server import TritonServer, build_repository, explicit, wait_gone

COUNT = 16
DELAY_MS = 500
# Triton's bound at SIGTERM, well above the 8 s the stream takes.
EXIT_TIMEOUT = 60


def start_stream(srv: TritonServer) -> tuple[grpcclient.InferenceServerClient, queue.Queue]:
    """Starts the stream; returns its client and the queue of (index or
    None at the end, error) it fills, after the first response arrived."""
    events: queue.Queue = queue.Queue()

    def on_event(result: Any, error: Any) -> None:
        if error is not None:
            events.put((None, str(error)))
            return
        response = result.get_response()
        if response.parameters["triton_final_response"].bool_param:
            events.put((None, None))
        else:
            events.put((int(result.as_numpy("IDX")[0]), None))

    c = grpcclient.InferenceServerClient(srv.grpc_url)
    c.start_stream(callback=on_event)
    values = grpcclient.InferInput("IN", [COUNT], "INT32")
    values.set_data_from_numpy(np.arange(COUNT, dtype=np.int32))
    delay = grpcclient.InferInput("DELAY", [1], "UINT32")
    delay.set_data_from_numpy(np.array([DELAY_MS], np.uint32))
    c.async_stream_infer(
        "repeat", [values, delay], request_id="long", enable_empty_final_response=True
    )
    first = events.get(timeout=60)
    assert first == (0, None), first
    return c, events


def rest_of_stream(events: queue.Queue) -> list[int]:
    """The indices after the first, up to the final response; fails on an
    error."""
    seen = []
    while True:
        index, error = events.get(timeout=60)
        assert error is None, f"the stream was cut after {len(seen) + 1} responses: {error}"
        if index is None:
            return seen
        seen.append(index)


def server(tmp_path: Path, *args: str) -> TritonServer:
    return TritonServer(build_repository(tmp_path / "repo", ["repeat"]), tmp_path, args=list(args))


def test_sigterm_lets_a_stream_in_flight_finish(tmp_path: Path) -> None:
    srv = server(tmp_path, f"--exit-timeout-secs={EXIT_TIMEOUT}")
    try:
        srv.wait_ready()
        stubs = srv.stubs()
        c, events = start_stream(srv)
        start = time.monotonic()
        srv.proc.send_signal(15)  # SIGTERM, as a rolling deploy sends it
        assert rest_of_stream(events) == list(range(1, COUNT)), srv.log()[-3000:]
        # The client, done, closes its stream; the server finalizes the
        # model and exits by itself, cleanly.
        c.stop_stream()
        c.close()
        code = srv.proc.wait(timeout=EXIT_TIMEOUT + 30)
        print(f"the server exited {time.monotonic() - start:.1f} s after SIGTERM")
    finally:
        srv.stop()
    assert code == 0, srv.log()[-3000:]
    assert not wait_gone(stubs), "a stub outlived the server"


def test_unload_lets_a_stream_in_flight_finish(tmp_path: Path) -> None:
    srv = server(tmp_path, *explicit(["repeat"]))
    try:
        srv.wait_ready()
        stubs = srv.stubs()
        c, events = start_stream(srv)
        h = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        h.unload_model("repeat")
        assert rest_of_stream(events) == list(range(1, COUNT)), srv.log()[-3000:]
        c.stop_stream()
        c.close()
        # The unload completes once the stream has ended: the stub goes.
        assert not wait_gone(stubs), "the stub outlived its model"
        assert not srv.model_ready("repeat")
        h.close()
    finally:
        srv.stop()
