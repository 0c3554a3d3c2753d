# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bench/hops.py's reading of Triton's trace file: a trace written in
parts is put together by its id and placed on the line of the request whose
send and receive hold it; warm-up requests, other models' traces and
traces missing a stamp of the chain stay out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench/
from bench import hops  # noqa: E402

STAMPS = [name for name in hops.CHAIN if name not in (hops.SEND, hops.RECV)]


def parts(trace_id: int, model: str, first_ns: int) -> list[dict]:
    """One trace as Triton 2.51 writes it: the model in one part, then
    each stamp in a part of its own, 1 µs apart."""
    out: list[dict] = [{"id": trace_id, "model_name": model, "model_version": 1}]
    for i, name in enumerate(STAMPS):
        out.append({"id": trace_id, "timestamps": [{"name": name, "ns": first_ns + i * 1000}]})
    return out


def test_traces_are_placed_on_their_requests_line() -> None:
    calls = [(0, 50_000), (100_000, 150_000), (200_000, 250_000)]
    traces = parts(1, "add_sub", 10_000) + parts(2, "add_sub", 110_000)
    traces += parts(3, "other", 210_000) + parts(4, "add_sub", 210_000)
    placed = hops.place(traces, calls, warmup=1)
    assert len(placed) == 2  # the warm-up's trace (id 1) left out
    first = placed[0]
    assert first[hops.SEND] == 0
    assert first["HTTP_RECV_START"] == 10_000
    assert first[hops.RECV] == 50_000
    result = hops.summarise(placed)
    assert [h["from"] for h in result["hops"]] == list(hops.CHAIN[:-1])
    assert result["hops"][0]["median_us"] == 10.0
    assert result["hops"][1]["median_us"] == 1.0
    assert result["whole_us"] == 50.0


def test_a_trace_outside_every_request_or_missing_a_stamp_stays_out() -> None:
    calls = [(0, 50_000), (100_000, 150_000)]
    late = parts(1, "add_sub", 60_000)  # between two requests
    short = [p for p in parts(2, "add_sub", 110_000) if "HTTP_SEND_END" not in str(p)]
    assert hops.place(late + short, calls, warmup=0) == []


def test_a_grpc_trace_is_placed_by_its_chain_not_by_the_stamp_taken_before_it() -> None:
    # Triton stamps GRPC_WAITREAD_START when it starts waiting for the next
    # request, while the request before it is still in flight.
    calls = [(0, 50_000), (100_000, 150_000)]
    grpc = [name for name in hops.GRPC_CHAIN if name not in (hops.SEND, hops.RECV)]
    trace = [{"id": 7, "model_name": "add_sub", "model_version": 1}]
    trace.append({"id": 7, "timestamps": [{"name": "GRPC_WAITREAD_START", "ns": 20_000}]})
    for i, name in enumerate(grpc):
        trace.append({"id": 7, "timestamps": [{"name": name, "ns": 110_000 + i * 1000}]})
    trace.append({"id": 7, "timestamps": [{"name": "REQUEST_END", "ns": 140_000}]})
    placed = hops.place(trace, calls, warmup=1, chain=hops.GRPC_CHAIN)
    assert len(placed) == 1
    assert placed[0]["GRPC_WAITREAD_END"] == 10_000
    result = hops.summarise(placed, hops.GRPC_CHAIN)
    assert [h["from"] for h in result["hops"]] == list(hops.GRPC_CHAIN[:-1])
    last = grpc[-1]
    assert result["hops"][-1]["median_us"] == (50_000 - placed[0][last]) / 1e3
    # The release, off the client's path, counts from the response's completion.
    done = placed[0]["INFER_RESPONSE_COMPLETE"]
    assert result["after_response_us"]["REQUEST_END"] == (40_000 - done) / 1e3


def test_a_threads_context_switches_are_read_from_proc() -> None:
    import threading
    import time

    base = f"/proc/self/task/{threading.get_native_id()}"
    before = hops._switches(base)
    time.sleep(0.001)  # blocks: one voluntary switch at least
    assert hops._switches(base) > before


def test_with_model_bls_only_the_bls_models_traces_are_placed() -> None:
    # bench.hops --model bls: the BLS model's requests, not add_sub's
    # (which it calls, and which Triton traces too when a trace is passed).
    calls = [(0, 50_000), (100_000, 150_000)]
    traces = parts(1, "bls", 10_000) + parts(2, "add_sub", 20_000) + parts(3, "bls", 110_000)
    placed = hops.place(traces, calls, warmup=0, model="bls")
    assert [row["HTTP_RECV_START"] for row in placed] == [10_000, 10_000]
    assert len(hops.place(traces, calls, warmup=0)) == 1  # add_sub's, by default


def test_the_floor_has_no_bls_model_to_trace() -> None:
    with pytest.raises(SystemExit):
        hops.main(["--model", "bls", "--system", "floor"])
