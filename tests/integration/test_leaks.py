# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Rounds of mixed traffic (small and large tensors, streams, errors,
cancellations) leave descriptors, threads and memory of the server and its
stubs where the first round left them. The long version of this run is a
soak script; this one is sized for CI."""

from __future__ import annotations

import concurrent.futures as cf
import os
import queue
import time
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository

MODELS = ["add_sub", "identity", "mock_llm", "errors", "async_sleep"]


@pytest.fixture(scope="module")
def leak_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("leaks")
    srv = TritonServer(build_repository(work / "repo", MODELS), work)
    try:
        srv.wait_ready()
        yield srv
    finally:
        assert srv.stop() == 0


def snapshot(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    fds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    # Client connections come and go with the clients: count the rest.
    return {"fds": sum(not t.startswith("socket:") for t in fds),
            "threads": int(status["Threads"].strip()),
            "rss_kib": int(status["VmRSS"].split()[0])}


def traffic(server: TritonServer, rounds: int) -> None:
    http = httpclient.InferenceServerClient(server.http_url)
    rng = np.random.default_rng(0)
    try:
        for _ in range(rounds):
            # Small and large tensors.
            for size in (4, 1 << 10, 1 << 18, 1 << 21):
                x = httpclient.InferInput("IN_FP32", [size], "FP32")
                x.set_data_from_numpy(rng.random(size, dtype=np.float32))
                http.infer("identity", [x])
            # A bad output and a raising execute: errors, not leaks.
            for mode in ("bad_output", "raise", "ok"):
                m = httpclient.InferInput("MODE", [1], "BYTES")
                m.set_data_from_numpy(np.array([mode.encode()], dtype=object))
                try:
                    http.infer("errors", [m])
                except InferenceServerException:
                    pass
            # Async requests, some cut short by a client timeout.
            g = grpcclient.InferenceServerClient(server.grpc_url)
            try:
                x = grpcclient.InferInput("IN", [1], "INT32")
                x.set_data_from_numpy(np.array([1], np.int32))
                s = grpcclient.InferInput("SLEEP_MS", [1], "FP32")
                s.set_data_from_numpy(np.array([500], np.float32))
                with pytest.raises(InferenceServerException):
                    g.infer("async_sleep", [x, s], client_timeout=0.05)
                # Streams, run to their end. (Streams cancelled by the client
                # are covered in test_streaming.py.)
                q: queue.Queue = queue.Queue()
                g.start_stream(callback=lambda result, error, q=q: q.put(error))
                for i in range(8):
                    p = grpcclient.InferInput("PROMPT", [1], "BYTES")
                    p.set_data_from_numpy(np.array([b"a b c"], dtype=object))
                    n = grpcclient.InferInput("MAX_TOKENS", [1], "INT32")
                    n.set_data_from_numpy(np.array([20], np.int32))
                    g.async_stream_infer("mock_llm", [p, n], request_id=str(i))
                for _ in range(8 * 20):
                    assert q.get(timeout=30) is None
                g.stop_stream()
            finally:
                g.close()
            def add(first: int) -> None:
                # One client per thread: tritonclient's HTTP client is not
                # thread-safe.
                c = httpclient.InferenceServerClient(server.http_url)
                try:
                    for i in range(first, first + 25):
                        a = httpclient.InferInput("INPUT0", [4], "FP32")
                        a.set_data_from_numpy(np.full(4, i, np.float32))
                        b = httpclient.InferInput("INPUT1", [4], "FP32")
                        b.set_data_from_numpy(np.ones(4, np.float32))
                        c.infer("add_sub", [a, b])
                finally:
                    c.close()
            with cf.ThreadPoolExecutor(8) as pool:
                list(pool.map(add, range(0, 200, 25)))
    finally:
        http.close()


def test_mixed_traffic_leaves_no_growth(leak_server: TritonServer) -> None:
    traffic(leak_server, 2)  # warm-up: caches, pools and arenas settle
    time.sleep(1.0)
    procs = [leak_server.proc.pid, *leak_server.stubs()]
    before = {p: snapshot(p) for p in procs}
    traffic(leak_server, 6)
    time.sleep(1.0)
    after = {p: snapshot(p) for p in procs}
    for p in procs:
        b, a = before[p], after[p]
        assert a["fds"] <= b["fds"], (p, b, a)
        if p != leak_server.proc.pid:  # the server's worker pools may vary
            assert a["threads"] <= b["threads"], (p, b, a)
        assert a["rss_kib"] <= b["rss_kib"] * 1.10 + 8192, (p, b, a)
