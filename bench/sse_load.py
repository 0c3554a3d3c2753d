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

The client is light so that it does not saturate at the token rates it
measures (in closed loop its own delay lands in the time to first token):
one ``asyncio.Protocol`` per connection on uvloop, llhttp (``httptools``)
for the status, headers and chunked body, and the ``data:`` lines of each
received buffer found and parsed as JSON in one go. Each stream has a
connection of its own, closed after its response, as ``curl`` in Triton's
``generate_stream`` examples does; a keep-alive pool would take the TCP
connect and accept out of each stream, for both backends alike, since the
official's and tritonpy's front end is the same Triton HTTP server. Kept
as before, so that the figures stay comparable with earlier runs.
``lag_p90_us`` is how late a 1 ms timer of the client woke (p90): a
client that is behind shows it there; ``runqueue_wait_s`` is how long its
thread waited for a CPU in the window (a busy machine), the rest of a late
wake is its own work.

The window works as in grpc_load.py: the same absolute ``--start`` and
``--end`` for every process of a measurement. Prints one JSON object.

``run_round`` is the same client for one round of N streams, for the
integration tests.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import re
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httptools

if __package__ in (None, ""):  # run as a script: bench/ is not a package then
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import grpc_load  # noqa: E402

# How long one stream may stay open: a bound for a stream that never ends
# (the failure this client exists to see), not a pace.
STREAM_LIMIT_S = 120.0
# The same in a benchmark window, where it must end the run in time.
WINDOW_STREAM_LIMIT_S = 20.0
# The timer whose lateness tells whether the client keeps up (loop_lag).
LAG_TICK_S = 0.001


@dataclass
class Stream:
    """What one client saw of one ``generate_stream`` call."""

    status: int | None = None  # None: no answer (refused, cut before one)
    events: list[dict] = field(default_factory=list)
    error: str | None = None  # an error event, a status, a cut connection
    ended: bool = False  # the body ended (after its last chunk)
    ttft_us: float | None = None
    itl_us: list[float] = field(default_factory=list)


# A ``data:`` line of an event (Triton writes ``data: {json}`` and a blank
# line per response); found in bulk in each received buffer.
_DATA_LINE = re.compile(rb"^data: ?(.*?)\r?$", re.M)


def request_bytes(target: str, path: str, body: dict) -> bytes:
    """The whole HTTP/1.1 request that posts ``body`` (as JSON) to
    ``path``. The client closes the connection after the response (the
    server need not: no ``Connection: close``, as aiohttp's client
    with a closing connector sent, so that the figures stay comparable)."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {target}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


class _StreamReader(asyncio.Protocol):
    """One ``generate_stream`` call on a connection of its own: writes the
    request when connected, feeds what arrives to llhttp (httptools) and
    turns each complete ``data:`` line of the body into an event of
    ``out``. ``done`` resolves when the body ends, the connection breaks or
    the answer is not HTTP."""

    def __init__(self, request: bytes, out: Stream, start: float, done: asyncio.Future) -> None:
        self.request, self.out, self.start, self.done = request, out, start, done
        self.prev = start
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.tail = b""  # a line not yet ended
        self.refused = bytearray()  # the body of an answer that is not 200

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # not an answer to this request
            self.finish("the server upgraded the connection")
        except httptools.HttpParserError as e:
            self.finish(f"not a valid HTTP answer: {e}")

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            why = f": {type(exc).__name__}: {exc}" if exc is not None else ""
            self.finish(f"connection ended mid-stream{why}")

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self.out.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if self.out.status != 200:
            self.refused += body
            return
        buf = self.tail + body if self.tail else body
        cut = buf.rfind(b"\n") + 1
        self.tail = buf[cut:]
        lines = _DATA_LINE.findall(buf, 0, cut)
        if not lines:
            return
        try:  # one parse per buffer, not one per event
            docs = json.loads(b"[" + b",".join(lines) + b"]")
        except ValueError:
            docs = None
        if docs is None or not all(isinstance(d, dict) for d in docs):
            docs = [_event(line) for line in lines]  # names the bad one
        now = time.perf_counter()
        out = self.out
        for doc in docs:
            if "error" in doc:
                out.error = f"error event: {doc['error']}"
                continue
            if out.ttft_us is None:
                out.ttft_us = (now - self.start) * 1e6
            else:
                out.itl_us.append((now - self.prev) * 1e6)
            self.prev = now
            out.events.append(doc)

    def on_message_complete(self) -> None:
        out = self.out
        if out.status != 200:
            out.error = f"HTTP {out.status}: {self.refused[:300].decode(errors='replace')}"
        else:
            out.ended = True
        self.finish(None)

    def finish(self, error: str | None) -> None:
        if error is not None:
            self.out.error = self.out.error or error
        if not self.done.done():
            self.done.set_result(None)
        if self.transport is not None:
            self.transport.close()


def _event(line: bytes) -> dict:
    try:
        doc = json.loads(line)
    except ValueError:
        return {"error": f"an event that is not JSON: {line[:200]!r}"}
    return doc if isinstance(doc, dict) else {"error": f"an event that is not an object: {doc!r}"}


@functools.cache
def address(target: str) -> tuple[str, int]:
    """The numeric address of ``target`` (host:port), looked up once per
    process rather than once per connection; IPv4 first, as Triton
    listens there by default."""
    host, _, port = target.rpartition(":")
    found = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    found.sort(key=lambda f: f[0] != socket.AF_INET)
    return str(found[0][4][0]), int(port)


async def within_task(limit: float, step: Awaitable[None]) -> None:
    """Awaits ``step`` in a task of its own, cancelled with
    asyncio.TimeoutError after ``limit`` seconds: Python 3.10's way."""
    await asyncio.wait_for(step, limit)


if sys.version_info >= (3, 11):

    async def within(limit: float, step: Awaitable[None]) -> None:
        """The same in the caller's task: the connection is made at once,
        not one turn of the loop later, so that it adds nothing to a TTFT."""
        async with asyncio.timeout(limit):
            await step

else:
    within = within_task


async def read_stream(
    target: str,
    path: str,
    body: dict | bytes,
    limit: float = STREAM_LIMIT_S,
    out: Stream | None = None,
) -> Stream:
    """Posts ``body`` (a dict, or a request of request_bytes) to ``path``
    on ``target`` (host:port), on a connection of its own, and reads the
    events into ``out`` (a new Stream unless given) until the body ends,
    the connection breaks or ``limit`` seconds pass. TTFT counts from
    before the connection is made."""
    out = out if out is not None else Stream()
    request = body if isinstance(body, bytes) else request_bytes(target, path, body)
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    reader = _StreamReader(request, out, time.perf_counter(), done)

    async def connect_and_read() -> None:
        await loop.create_connection(lambda: reader, *address(target))
        await done

    try:
        await within(limit, connect_and_read())
    except asyncio.TimeoutError:  # before OSError: from 3.11 on, it is TimeoutError, one
        out.error = out.error or f"still open after {limit:.0f} s"
    except OSError as e:  # refused, or reset before the connection was made
        out.error = out.error or f"connection failed: {type(e).__name__}: {e}"
    finally:
        if reader.transport is not None:
            reader.transport.close()
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


def stream_path(model: str) -> str:
    return f"/v2/models/{model}/generate_stream"


async def run_round(
    http: str,
    model: str,
    n: int,
    body: Callable[[int], dict],
    check: Callable[[int, Stream], str | None],
) -> dict[int, str]:
    """``n`` concurrent streams to ``model`` on ``http`` (host:port), the
    k-th posting ``body(k)``: {k: problem} for each stream ``check`` faults."""
    path = stream_path(model)
    got = await asyncio.gather(*(read_stream(http, path, body(k)) for k in range(n)))
    problems = {k: check(k, s) for k, s in enumerate(got)}
    return {k: p for k, p in problems.items() if p is not None}


async def run_window(a: argparse.Namespace, out: dict) -> None:
    path = stream_path(a.model)
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

    same = request_bytes(a.target, path, {"N": a.tokens})  # the request without --ids

    def request_of(ident: int | None) -> bytes:
        if ident is None:
            return same
        return request_bytes(a.target, path, {"N": a.tokens, "ID": ident, "MODE": a.pattern})

    async def client(k: int) -> None:
        serial = 0
        while time.time() < a.end:
            ident = k * 1_000_000 + serial if a.ids else None
            serial += 1
            sent = time.time()
            s = await read_stream(a.target, path, request_of(ident), limit=a.stream_limit)
            if record(s, ident, sent, 0.0) is not None:
                await asyncio.sleep(0.01)  # a failing server must not spin the client

    async def open_loop() -> None:
        slots = asyncio.Semaphore(a.conns)
        tasks: set[asyncio.Task] = set()
        wall0, perf0 = time.time(), time.perf_counter()
        interval, late = 1.0 / a.rate, 0

        async def one(ident: int | None, due: float) -> None:
            try:
                waited = time.perf_counter() - due
                s = await read_stream(a.target, path, request_of(ident), limit=a.stream_limit)
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

    if a.rate:
        await open_loop()
    else:
        await asyncio.gather(*(client(k) for k in range(a.conns)))
    out.update(counts, ttft_us=ttft, itl_us=itl)


async def loop_lag(start: float, end: float, out: dict) -> None:
    """How late the event loop wakes a timer of LAG_TICK_S in the window:
    ``lag_p90_us``. A client that is behind (on its own CPU, or waiting
    for a core of a busy machine) wakes late, and its delay is in every
    time it measures."""
    await asyncio.sleep(max(0.0, start - time.time()))
    late: list[float] = []
    waited = _runqueue_wait()
    while time.time() < end:
        t0 = time.perf_counter()
        await asyncio.sleep(LAG_TICK_S)
        late.append((time.perf_counter() - t0 - LAG_TICK_S) * 1e6)
    late.sort()
    if late:
        out["lag_p90_us"] = late[int(0.9 * (len(late) - 1))]
    if waited is not None and (now := _runqueue_wait()) is not None:
        out["runqueue_wait_s"] = now - waited


def _runqueue_wait() -> float | None:
    """Seconds the loop's thread has waited for a CPU while runnable
    (Linux schedstat), or None where that is not kept."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


async def main_async(a: argparse.Namespace) -> dict:
    out: dict[str, Any] = {}
    grace = max(10.0, a.end - a.start) + a.stream_limit
    try:
        await asyncio.wait_for(
            asyncio.gather(
                run_window(a, out),
                grpc_load.cpu_window(a.start, a.end, out),
                loop_lag(a.start, a.end, out),
            ),
            timeout=a.end - time.time() + grace,
        )
    except asyncio.TimeoutError:
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
