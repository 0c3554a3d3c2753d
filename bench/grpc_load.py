# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A closed-loop gRPC load generator for Triton's KServe v2 gRPC API.

One process, one channel, ``--conns`` concurrent callers on asyncio. The
requests are serialized once and sent as raw bytes (no protobuf work per
call) so that the client spends its CPU on gRPC itself. Every worker process
of one measurement gets the same absolute ``--start``/``--end`` times
(time.time()): before ``--start`` it warms up, between the two it measures,
after ``--end`` it stops, so several processes measure the same window and
the caller can sample server CPU at exactly those instants.

Modes:
  unary   ModelInfer on add_sub-like models; per-request latency.
  stream  ModelStreamInfer on a decoupled model that sends ``--tokens``
          responses per request; time to first token and inter-token gaps.

Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from tritonclient.grpc import service_pb2 as pb

SERVICE = "/inference.GRPCInferenceService/"


def add_sub_request(model: str) -> bytes:
    req = pb.ModelInferRequest(model_name=model)
    for name, values in (("INPUT0", [1, 2, 3, 4]), ("INPUT1", [1, 1, 1, 1])):
        t = req.inputs.add()
        t.name, t.datatype = name, "FP32"
        t.shape.extend([4])
        req.raw_input_contents.append(np.asarray(values, dtype=np.float32).tobytes())
    return req.SerializeToString()


def stream_request(model: str, tokens: int) -> bytes:
    req = pb.ModelInferRequest(model_name=model)
    t = req.inputs.add()
    t.name, t.datatype = "N", "INT32"
    t.shape.extend([1])
    req.raw_input_contents.append(np.asarray([tokens], dtype=np.int32).tobytes())
    return req.SerializeToString()


def llm_request(model: str, prompt: bytes, tokens: int) -> bytes:
    """Triton's LLM tensors: text_input (BYTES), max_tokens, stream=true."""
    req = pb.ModelInferRequest(model_name=model)
    for name, datatype, raw in (
        ("text_input", "BYTES", len(prompt).to_bytes(4, "little") + prompt),
        ("max_tokens", "INT32", np.asarray([tokens], dtype=np.int32).tobytes()),
        ("stream", "BOOL", b"\x01"),
    ):
        t = req.inputs.add()
        t.name, t.datatype = name, datatype
        t.shape.extend([1])
        req.raw_input_contents.append(raw)
    return req.SerializeToString()


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def cpu_window(start: float, end: float, out: dict) -> None:
    await asyncio.sleep(max(0.0, start - time.time()))
    c0 = cpu_seconds()
    await asyncio.sleep(max(0.0, end - time.time()))
    out["client_cpu_s"] = cpu_seconds() - c0


async def run_unary(a: argparse.Namespace, channel: grpc.aio.Channel, out: dict) -> None:
    call = channel.unary_unary(SERVICE + "ModelInfer")
    payload = add_sub_request(a.model)
    lat: list[float] = []
    counts = {"ok": 0, "errors": 0}

    async def caller() -> None:
        while True:
            t0 = time.time()
            if t0 >= a.end:
                return
            p0 = time.perf_counter()
            try:
                await call(payload)
                ok = True
            except grpc.aio.AioRpcError as e:
                ok = False
                out.setdefault("error", f"{e.code().name}: {e.details()}")
            p1 = time.perf_counter()
            done = t0 + (p1 - p0)
            if a.start <= done <= a.end:
                if ok:
                    counts["ok"] += 1
                    lat.append((p1 - p0) * 1e6)
                else:
                    counts["errors"] += 1
            if not ok:
                await asyncio.sleep(0.01)  # a failing model must not spin the client

    await asyncio.gather(*(caller() for _ in range(a.conns)))
    out.update(counts, latency_us=lat)


async def run_stream(a: argparse.Namespace, channel: grpc.aio.Channel, out: dict) -> None:
    payload = a.payload.read_bytes() if a.payload else stream_request(a.model, a.tokens)
    ttft: list[float] = []
    itl: list[float] = []
    counts = {"ok": 0, "errors": 0, "tokens": 0}

    async def streamer() -> None:
        call = channel.stream_stream(SERVICE + "ModelStreamInfer")()
        try:
            while time.time() < a.end:
                sent = time.time()
                p_prev = time.perf_counter()
                await call.write(payload)
                in_window = a.start <= sent <= a.end
                failed = False
                for k in range(a.tokens):
                    msg = await call.read()
                    now_p = time.perf_counter()
                    now = sent + (now_p - p_prev) if k == 0 else time.time()
                    if msg is grpc.aio.EOF or msg[:1] == b"\x0a":
                        # ModelStreamInferResponse field 1 (error_message) set
                        if msg is not grpc.aio.EOF:
                            out.setdefault("error", bytes(msg[2:200]).decode(errors="replace"))
                        failed = True
                        break
                    gap = (now_p - p_prev) * 1e6
                    p_prev = now_p
                    if k == 0:
                        if in_window:
                            ttft.append(gap)
                    elif a.start <= now <= a.end:
                        itl.append(gap)
                    if a.start <= now <= a.end:
                        counts["tokens"] += 1
                if failed:
                    counts["errors"] += in_window
                    await asyncio.sleep(0.01)
                    if msg is grpc.aio.EOF:
                        return
                else:
                    counts["ok"] += in_window
        finally:
            call.cancel()

    await asyncio.gather(*(streamer() for _ in range(a.conns)))
    out.update(counts, ttft_us=ttft, itl_us=itl)


async def main_async(a: argparse.Namespace) -> dict:
    out: dict = {}
    opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    async with grpc.aio.insecure_channel(a.target, options=opts) as channel:
        work = run_unary(a, channel, out) if a.mode == "unary" else run_stream(a, channel, out)
        grace = max(10.0, a.end - a.start)
        try:
            await asyncio.wait_for(
                asyncio.gather(work, cpu_window(a.start, a.end, out)),
                timeout=a.end - time.time() + grace,
            )
        except asyncio.TimeoutError:
            out["timed_out"] = True
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", required=True, help="host:port of Triton's gRPC endpoint")
    p.add_argument("--mode", choices=("unary", "stream"), default="unary")
    p.add_argument("--model", required=True)
    window_arguments(p, tokens=100)
    p.add_argument(
        "--payload", type=Path, help="stream mode: a serialized ModelInferRequest to send as is"
    )
    return run_and_print(main_async, p.parse_args())


def window_arguments(p: argparse.ArgumentParser, tokens: int) -> None:
    """The flags every closed-loop client of the suite takes."""
    p.add_argument("--conns", type=int, default=1, help="concurrent calls or streams")
    p.add_argument("--tokens", type=int, default=tokens, help="tokens per stream request")
    p.add_argument("--start", type=float, required=True, help="time.time() measuring starts")
    p.add_argument("--end", type=float, required=True, help="time.time() measuring ends")


def run_and_print(
    main_async: Callable[[argparse.Namespace], Coroutine[Any, Any, dict]], a: argparse.Namespace
) -> int:
    """Run a client on uvloop (if installed) and print its JSON, with
    ``joined_late`` when it was ready to send (its imports done) only
    after the window had opened: it then measured less than the window."""
    began = time.time()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    out = asyncio.run(main_async(a))
    out["window_s"] = a.end - a.start
    out["joined_late"] = began > a.start
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
