# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Rounds of decoupled streams against a real tritonserver: the resident
memory of the streaming model's stub, measured at rest after each round,
must settle after the first round (caches, pymalloc arenas and the loop's
buffers are sized then) and stop growing.

    python tests/soak/streams_rss.py --rounds 5 --streams 10000

Each stream is one request to mock_llm (decoupled, `def execute` sending
TOKENS responses and the final flag), run to its end over a gRPC stream;
`--concurrency` client threads each keep one gRPC stream open and send
their requests through it one after the other. The report gives the stub's
RSS after each round and its growth from the second round to the last;
tests/integration/test_leaks.py runs a CI-sized version and asserts on it.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import soak  # noqa: E402

from server import TritonServer, build_repository  # noqa: E402

MODEL = "mock_llm"


def stream_round(server: TritonServer, streams: int, tokens: int, concurrency: int) -> int:
    """Runs `streams` requests of `tokens` tokens each; returns how many
    ended with an error (each request's error, or a missing token)."""
    left = [streams]
    failed = [0]
    lock = threading.Lock()

    def worker() -> None:
        events: queue.Queue = queue.Queue()
        client = grpcclient.InferenceServerClient(server.grpc_url)
        client.start_stream(callback=lambda result, error: events.put((result, error)))
        prompt = grpcclient.InferInput("PROMPT", [1], "BYTES")
        prompt.set_data_from_numpy(np.array([b"rss"], dtype=object))
        count = grpcclient.InferInput("MAX_TOKENS", [1], "INT32")
        count.set_data_from_numpy(np.array([tokens], np.int32))
        try:
            while True:
                with lock:
                    if left[0] == 0:
                        return
                    left[0] -= 1
                client.async_stream_infer(MODEL, [prompt, count])
                got = 0
                while got < tokens:
                    _, error = events.get(timeout=60)
                    if error is not None:
                        with lock:
                            failed[0] += 1
                        break
                    got += 1
        finally:
            client.stop_stream()
            client.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failed[0]


def stub_rss_kib(server: TritonServer) -> int:
    """RSS of the model's stub(s), at rest."""
    samples = soak.at_rest(server)
    return sum(s["rss_kib"] for name, s in samples.items() if name.startswith(MODEL))


def run(
    server: TritonServer, *, rounds: int, streams: int, tokens: int, concurrency: int, log=print
) -> dict:
    rss = []
    failures = 0
    for i in range(rounds):
        start = time.monotonic()
        failures += stream_round(server, streams, tokens, concurrency)
        rss.append(stub_rss_kib(server))
        log(
            f"round {i + 1}: {streams} streams in {time.monotonic() - start:.1f} s, stub RSS {rss[-1]} KiB"
        )
    second, last = rss[min(1, rounds - 1)], rss[-1]
    return {
        "rounds": rounds,
        "streams_per_round": streams,
        "tokens_per_stream": tokens,
        "failed_streams": failures,
        "stub_rss_kib": rss,
        "growth_from_round_2": (last - second) / second,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--streams", type=int, default=10_000, help="streams per round")
    ap.add_argument("--tokens", type=int, default=16, help="tokens per stream")
    ap.add_argument(
        "--concurrency", type=int, default=32, help="client threads, one gRPC stream each"
    )
    ap.add_argument("--json", type=Path, help="also write the report here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tritonpy-streams-") as tmp:
        work = Path(tmp)
        server = TritonServer(build_repository(work / "repo", [MODEL]), work)
        try:
            server.wait_ready()
            sizes = {k: getattr(args, k) for k in ("rounds", "streams", "tokens", "concurrency")}
            report = run(server, **sizes)
        finally:
            server.stop()
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    ok = report["failed_streams"] == 0 and report["growth_from_round_2"] < 0.05
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
