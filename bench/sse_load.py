# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A load generator for Triton's ``generate_stream`` endpoint (server-sent
events over HTTP/1.1), which checks every token.

Closed loop by default: ``--conns`` concurrent clients, each with a
connection of its own, post
``{"N": tokens}`` (the stream models of bench/models.py; with ``--ids``
also ``ID`` and ``MODE``, which the test models take) and read each event:
a stream must carry TOKEN 0..N-1 in order (each event with the request's
ID, where sent), and end (the chunked body's terminator) after the last
one. A stream that loses a
token, gets one out of order, carries an error event, or is cut off counts
as an error, and the first such is described in ``"bad"``.

Open loop with ``--rate R``: a new stream every 1/R seconds (constant
intervals, as genai-perf's ``--request-rate``), each on a connection of its
own, however many are still open; ``--conns`` then only bounds how many may
be open at once (an arrival past it is counted in ``"late"`` and sent when
one ends), so that an overloaded server cannot make the client run out of
descriptors. TTFT is counted from the stream's scheduled arrival, so a
late client does not hide the server's queue.

The window works as in grpc_load.py: the same absolute ``--start`` and
``--end`` for every process of a measurement. Prints one JSON object.

``run_round`` is the same client for one round of N streams, for the
integration tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

if __package__ in (None, ""):  # run as a script: bench/ is not a package then
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import grpc_load  # noqa: E402

# How long one stream may stay open: a bound for a stream that never ends
# (the failure this client exists to see), not a pace.
STREAM_LIMIT_S = 120.0
# The same in a benchmark window, where it must end the run in time.
WINDOW_STREAM_LIMIT_S = 20.0


@dataclass
class Stream:
    """What one client saw of one ``generate_stream`` call."""

    status: int | None = None  # None: no answer (refused, cut before one)
    events: list[dict] = field(default_factory=list)
    error: str | None = None  # an error event, a status, a cut connection
    ended: bool = False  # the body ended (after its last chunk)
    ttft_us: float | None = None
    itl_us: list[float] = field(default_factory=list)


async def read_stream(
    session: aiohttp.ClientSession,
    url: str,
    body: dict,
    limit: float = STREAM_LIMIT_S,
    out: Stream | None = None,
) -> Stream:
    """Posts ``body`` to ``url`` and reads the events into ``out`` (a new
    Stream unless given) until the body ends, the connection breaks or
    ``limit`` seconds pass."""
    out = out if out is not None else Stream()
    start = prev = time.perf_counter()
    try:
        async with asyncio.timeout(limit):
            async with session.post(url, json=body) as resp:
                out.status = resp.status
                if resp.status != 200:
                    out.error = f"HTTP {resp.status}: {(await resp.text())[:300]}"
                    return out
                async for line in resp.content:
                    if not line.startswith(b"data:"):
                        continue
                    doc = json.loads(line[5:])
                    if "error" in doc:
                        out.error = f"error event: {doc['error']}"
                        continue
                    now = time.perf_counter()
                    if out.ttft_us is None:
                        out.ttft_us = (now - start) * 1e6
                    else:
                        out.itl_us.append((now - prev) * 1e6)
                    prev = now
                    out.events.append(doc)
                out.ended = True
    except TimeoutError:
        out.error = out.error or f"still open after {limit:.0f} s"
    except aiohttp.ClientError as e:  # cut off before the body's end
        why = getattr(e, "message", "") or str(e)
        out.error = out.error or f"connection ended mid-stream: {type(e).__name__}: {why}"
    return out


def token_problem(s: Stream, ident: int | None, tokens: int) -> str | None:
    """Why ``s`` is not TOKEN 0..tokens-1 (of request ``ident`` unless
    None), ended; or None."""
    if s.error is not None:
        return f"{s.error} (after {len(s.events)} of {tokens} tokens)"
    got = [(e.get("ID") if ident is not None else None, e.get("TOKEN")) for e in s.events]
    want = [(ident, i) for i in range(tokens)]
    if got != want:
        for i, (g, w) in enumerate(zip(got, want, strict=False)):
            if g != w:
                return f"event {i} is (ID, TOKEN) {g}, expected {w}"
        return f"response ended after {len(got)} of {tokens} tokens"
    if not s.ended:
        return "the stream did not end"
    return None


def connector(conns: int) -> aiohttp.TCPConnector:
    # One connection per client: no pool limit, no keep-alive reuse races.
    return aiohttp.TCPConnector(limit=0, limit_per_host=0, force_close=True)


async def run_round(
    http: str,
    model: str,
    n: int,
    body: Callable[[int], dict],
    check: Callable[[int, Stream], str | None],
) -> dict[int, str]:
    """``n`` concurrent streams to ``model`` on ``http`` (host:port), the
    k-th posting ``body(k)``: {k: problem} for each stream ``check`` faults."""
    url = f"http://{http}/v2/models/{model}/generate_stream"
    async with aiohttp.ClientSession(connector=connector(n)) as session:
        got = await asyncio.gather(*(read_stream(session, url, body(k)) for k in range(n)))
    problems = {k: check(k, s) for k, s in enumerate(got)}
    return {k: p for k, p in problems.items() if p is not None}


async def run_window(a: argparse.Namespace, out: dict) -> None:
    url = f"http://{a.target}/v2/models/{a.model}/generate_stream"
    ttft: list[float] = []
    itl: list[float] = []
    counts = {"ok": 0, "errors": 0, "tokens": 0}

    def record(s: Stream, ident: int | None, sent: float, waited: float) -> str | None:
        """Counts a stream that was due at ``sent`` (time.time()) and
        waited ``waited`` seconds on the client before it was sent; what
        was wrong with it, if anything."""
        done = time.time()
        problem = token_problem(s, ident, a.tokens)
        if problem is not None:
            out.setdefault("bad", problem)
        if a.start <= sent <= a.end:
            counts["ok" if problem is None else "errors"] += 1
            if s.ttft_us is not None:
                ttft.append(s.ttft_us + waited * 1e6)
        if a.start <= done <= a.end:
            # Tokens of a stream that ends in the window (a stream is short).
            counts["tokens"] += len(s.events)
            itl.extend(s.itl_us)
        return problem

    def body_of(ident: int | None) -> dict:
        body = {"N": a.tokens}
        if ident is not None:
            body.update(ID=ident, MODE=a.pattern)
        return body

    async def client(session: aiohttp.ClientSession, k: int) -> None:
        serial = 0
        while time.time() < a.end:
            ident = k * 1_000_000 + serial if a.ids else None
            serial += 1
            sent = time.time()
            s = await read_stream(session, url, body_of(ident), limit=a.stream_limit)
            if record(s, ident, sent, 0.0) is not None:
                await asyncio.sleep(0.01)  # a failing server must not spin the client

    async def open_loop(session: aiohttp.ClientSession) -> None:
        slots = asyncio.Semaphore(a.conns)
        tasks: set[asyncio.Task] = set()
        wall0, perf0 = time.time(), time.perf_counter()
        interval, late = 1.0 / a.rate, 0

        async def one(ident: int | None, due: float) -> None:
            try:
                waited = time.perf_counter() - due
                s = await read_stream(session, url, body_of(ident), limit=a.stream_limit)
                record(s, ident, wall0 + (due - perf0), waited)
            finally:
                slots.release()

        k = 0
        while wall0 + k * interval < a.end:
            due = perf0 + k * interval  # constant intervals from the first
            if (pause := due - time.perf_counter()) > 0:
                await asyncio.sleep(pause)
            if slots.locked():
                late += 1
            await slots.acquire()
            task = asyncio.create_task(one(k if a.ids else None, due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            k += 1
        await asyncio.gather(*tasks)
        out["late"] = late

    async with aiohttp.ClientSession(connector=connector(a.conns)) as session:
        if a.rate:
            await open_loop(session)
        else:
            await asyncio.gather(*(client(session, k) for k in range(a.conns)))
    out.update(counts, ttft_us=ttft, itl_us=itl)


async def main_async(a: argparse.Namespace) -> dict:
    out: dict[str, Any] = {}
    grace = max(10.0, a.end - a.start) + a.stream_limit
    try:
        await asyncio.wait_for(
            asyncio.gather(run_window(a, out), grpc_load.cpu_window(a.start, a.end, out)),
            timeout=a.end - time.time() + grace,
        )
    except TimeoutError:
        out["timed_out"] = True
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", required=True, help="host:port of Triton's HTTP endpoint")
    p.add_argument("--model", required=True)
    p.add_argument("--ids", action="store_true", help="send ID and MODE (the test models)")
    p.add_argument("--pattern", type=int, default=0, help="MODE, with --ids")
    p.add_argument(
        "--stream-limit",
        type=float,
        default=WINDOW_STREAM_LIMIT_S,
        help="seconds a stream may stay open before it counts as never ending",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="open loop: new streams per second (--conns then bounds the open ones)",
    )
    grpc_load.window_arguments(p, tokens=32)
    return grpc_load.run_and_print(main_async, p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
