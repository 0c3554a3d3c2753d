# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The floor of the llm scenarios: the llm example's network and
tritonpy.batching's ContinuousBatcher driven in one Python process, with no
server. Closed-loop clients on the same event loop as the batcher stand in
for the gRPC streams, under the window rules of bench/grpc_load.py; the
figures are the most any serving layer around this model can reach.

    python -m bench.llm_floor --conns 64 --tokens 64 --start S --end E

With --window-from-stdin (--start and --end then ignored) it sets itself up
(torch, the example, the batcher), prints "ready" and reads "START END"
from stdin: the window then starts after its set-up however long that took
on a busy machine. Prints one JSON object on stdout (after "ready"), with grpc_load's keys (ok, errors,
tokens, ttft_us, itl_us, client_cpu_s) plus busy_s: seconds of the window
spent inside the step function, and cpu_s: this process's CPU in it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import resource
import sys
import threading
import time
from pathlib import Path

from bench.grpc_load import run_and_print, window_arguments

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llm" / "model.py"
# 32 bytes, the prompt every llm scenario sends.
PROMPT = b"Once upon a time, in a far land "
SLOTS = 64  # the example's max_active_sequences


def load_example():
    spec = importlib.util.spec_from_file_location("llm_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Busy:
    """Time spent in step calls, clipped to the window (the step runs in the
    batcher's thread)."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.seconds = 0.0
        self.lock = threading.Lock()

    def add(self, t0: float, t1: float) -> None:
        lo, hi = max(t0, self.start), min(t1, self.end)
        if hi > lo:
            with self.lock:
                self.seconds += hi - lo


async def main_async(a: argparse.Namespace) -> dict:
    import torch

    from tritonpy.batching import ContinuousBatcher

    torch.set_num_threads(1)  # as the example's initialize() does
    example = load_example()
    gen = example.Generator(SLOTS)

    def step(batch):
        t0 = time.time()
        out = gen.step(batch)
        busy.add(t0, time.time())
        return out

    batcher = ContinuousBatcher(step, max_active=SLOTS)
    tokens, count = gen.fit(PROMPT, a.tokens)
    if a.window_from_stdin:
        print("ready", flush=True)
        a.start, a.end = (float(x) for x in sys.stdin.readline().split())
    busy = Busy(a.start, a.end)
    ttft: list[float] = []
    itl: list[float] = []
    counts = {"ok": 0, "errors": 0, "tokens": 0}

    async def client() -> None:
        while time.time() < a.end:
            sent = time.time()
            prev = time.perf_counter()
            in_window = a.start <= sent <= a.end
            k = 0
            async for _token in batcher.generate(
                example.Stream(list(tokens)), steps=count, cost=len(tokens) + count
            ):
                now_p = time.perf_counter()
                now = time.time()
                gap = (now_p - prev) * 1e6
                prev = now_p
                if k == 0:
                    if in_window:
                        ttft.append(gap)
                elif a.start <= now <= a.end:
                    itl.append(gap)
                if a.start <= now <= a.end:
                    counts["tokens"] += 1
                k += 1
            counts["ok"] += in_window

    async def cpu_window(out: dict) -> None:
        await asyncio.sleep(max(0.0, a.start - time.time()))
        c0 = cpu_seconds()
        await asyncio.sleep(max(0.0, a.end - time.time()))
        out["cpu_s"] = cpu_seconds() - c0

    out: dict = {}
    await asyncio.gather(*(client() for _ in range(a.conns)), cpu_window(out))
    batcher.close()
    out.update(counts, ttft_us=ttft, itl_us=itl, busy_s=busy.seconds, client_cpu_s=0.0)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    window_arguments(p, tokens=64)
    p.add_argument(
        "--window-from-stdin", action="store_true", help='print "ready", then read "START END"'
    )
    return run_and_print(main_async, p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
