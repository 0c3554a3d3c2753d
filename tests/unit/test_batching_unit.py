# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""tritonpy.batching without a server: who is in each step, when streams
join and leave, budgets, cancellation, errors; and @batched."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import traceback

import pytest

from tritonpy.batching import ContinuousBatcher, Sequence, batched


class Recorder:
    """A step function that records each step's (data, slot, steps) and
    answers ``data * 1000 + steps``; it can hold a step until released."""

    def __init__(self) -> None:
        self.log: list[list[tuple[str, int, int]]] = []
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def __call__(self, batch: list[Sequence[str]]) -> list[str]:
        self.log.append([(s.data, s.slot, s.steps) for s in batch])
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        return [f"{s.data}{s.steps}" for s in batch]

    def members(self, i: int) -> list[str]:
        return [d for d, _, _ in self.log[i]]


async def collect(b: ContinuousBatcher, data: str, steps: int, **kw) -> list:
    return [x async for x in b.generate(data, steps=steps, **kw)]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 5))


def test_each_stream_gets_its_outputs_in_order() -> None:
    async def main():
        b = ContinuousBatcher(Recorder(), max_active=8)
        return await asyncio.gather(collect(b, "a", 3), collect(b, "b", 5), collect(b, "c", 0))

    assert run(main()) == [["a0", "a1", "a2"], ["b0", "b1", "b2", "b3", "b4"], []]


def test_streams_join_at_the_next_step_and_leave_when_done() -> None:
    rec = Recorder()
    rec.gate = threading.Event()

    async def main():
        b = ContinuousBatcher(rec, max_active=8)
        first = asyncio.ensure_future(collect(b, "a", 4))
        await asyncio.to_thread(rec.entered.wait, 30)  # a's first step holds
        second = asyncio.ensure_future(collect(b, "b", 2))
        await asyncio.sleep(0.01)
        rec.gate.set()
        return await first, await second

    a, bb = run(main())
    assert a == ["a0", "a1", "a2", "a3"] and bb == ["b0", "b1"]
    # b joins at the step after the one running when it came (its first:
    # steps == 0, a prefill) and leaves after its two; a goes on alone.
    assert rec.log == [
        [("a", 0, 0)],
        [("a", 0, 1), ("b", 1, 0)],
        [("a", 0, 2), ("b", 1, 1)],
        [("a", 0, 3)],
    ]


def test_max_active_makes_streams_wait_never_refused() -> None:
    rec = Recorder()

    async def main():
        b = ContinuousBatcher(rec, max_active=3)
        return await asyncio.gather(*(collect(b, f"s{i}", 1 + i % 4) for i in range(200)))

    out = run(main())
    assert out == [[f"s{i}{k}" for k in range(1 + i % 4)] for i in range(200)]
    assert max(len(s) for s in rec.log) == 3
    # Slots are below max_active and never shared within a step.
    for step in rec.log:
        slots = [slot for _, slot, _ in step]
        assert slots == sorted(set(slots)) and all(0 <= x < 3 for x in slots)


def test_a_joining_stream_takes_the_lowest_free_slot_and_steps_go_in_slot_order() -> None:
    rec = Recorder()
    rec.gate = threading.Event()

    async def main():
        b = ContinuousBatcher(rec, max_active=4)
        a = asyncio.ensure_future(collect(b, "a", 1))
        bb = asyncio.ensure_future(collect(b, "b", 3))
        await asyncio.to_thread(rec.entered.wait, 30)  # step 1 (a and b) holds
        c = asyncio.ensure_future(collect(b, "c", 1))
        await asyncio.sleep(0.01)
        rec.gate.set()
        return await a, await bb, await c

    assert run(main()) == (["a0"], ["b0", "b1", "b2"], ["c0"])
    # a left slot 0 after step 1; c joined in step 2 and got it.
    assert rec.log[:2] == [[("a", 0, 0), ("b", 1, 0)], [("c", 0, 0), ("b", 1, 1)]]


def test_cache_budget_limits_the_summed_cost_in_arrival_order() -> None:
    rec = Recorder()

    async def main():
        b = ContinuousBatcher(rec, max_active=8, cache_budget=10)
        return await asyncio.gather(
            collect(b, "a", 3, cost=6),
            collect(b, "b", 3, cost=6),  # does not fit beside a: waits
            collect(b, "c", 3, cost=3),  # would fit, but does not overtake b
            collect(b, "d", 2, cost=50),  # more than the budget: runs alone
        )

    assert [len(x) for x in run(main())] == [3, 3, 3, 2]
    assert [rec.members(i) for i in range(3)] == [["a"]] * 3
    assert rec.members(3) == ["b", "c"]
    assert ["d"] in [rec.members(i) for i in range(len(rec.log))]
    assert all("d" not in rec.members(i) or rec.members(i) == ["d"] for i in range(len(rec.log)))


def test_a_cancelled_stream_leaves_before_the_next_step() -> None:
    """Cancelled during a step: that step's output for it is dropped, the
    next step runs without it, and its slot goes to a waiting stream."""
    rec = Recorder()
    rec.gate = threading.Event()

    async def main():
        b = ContinuousBatcher(rec, max_active=1)
        got: list[str] = []

        async def consume():
            async for x in b.generate("a", steps=100):
                got.append(x)

        task = asyncio.ensure_future(consume())
        waiter = asyncio.ensure_future(collect(b, "w", 2))
        await asyncio.to_thread(rec.entered.wait, 30)
        assert b.active == 1 and b.waiting == 1
        task.cancel()
        await asyncio.sleep(0)
        assert b.active == 0  # freed at once, while the step still runs
        rec.gate.set()
        return got, await waiter

    got, w = run(main())
    assert got == [] and w == ["w0", "w1"]
    assert [rec.members(i) for i in range(len(rec.log))] == [["a"], ["w"], ["w"]]
    assert rec.log[1][0][1] == 0  # w took a's slot


def test_cancelled_callback_is_polled_before_each_step() -> None:
    rec = Recorder()
    flag = {"a": False}

    async def main():
        b = ContinuousBatcher(rec, max_active=4)
        got = []
        async for x in b.generate("a", steps=50, cancelled=lambda: flag["a"]):
            got.append(x)
            if len(got) == 3:
                flag["a"] = True
        return got

    got = run(main())
    # The flag turned during or after step 3: at most one more step saw a.
    assert got[:3] == ["a0", "a1", "a2"] and len(got) <= 4 and len(rec.log) <= 4


def test_finish_from_the_step_function_ends_the_stream() -> None:
    def step(batch):
        for s in batch:
            if s.steps == 1:
                s.finish()
        return [s.steps for s in batch]

    async def main():
        b = ContinuousBatcher(step, max_active=2)
        return await collect(b, None, 10)

    assert run(main()) == [0, 1]


def test_a_failing_step_fails_its_streams_and_the_batcher_goes_on() -> None:
    calls = []

    def step(batch):
        calls.append(len(batch))
        if len(calls) == 2:
            raise ValueError("boom")
        return [s.data for s in batch]

    async def main():
        b = ContinuousBatcher(step, max_active=4)
        with pytest.raises(ValueError, match="boom"):
            await collect(b, "x", 5)
        assert b.active == 0
        return await collect(b, "y", 2)

    assert run(main()) == ["y", "y"]


def test_async_step_runs_on_the_loop_and_on_step_reports() -> None:
    seen = []

    async def step(batch):
        await asyncio.sleep(0)
        return [threading.current_thread() is threading.main_thread()] * len(batch)

    async def main():
        b = ContinuousBatcher(step, max_active=2, on_step=lambda a, n: seen.append((a, n)))
        out = await asyncio.gather(collect(b, 1, 2), collect(b, 2, 3))
        # A stream leaving between steps is reported when the batcher idles.
        gone = asyncio.ensure_future(collect(b, 3, 10**9))
        while len(seen) < 4:
            await asyncio.sleep(0.001)
        gone.cancel()
        while seen[-1] != (0, 0):
            await asyncio.sleep(0.001)
        return out

    assert run(main()) == [[True, True], [True, True, True]]
    assert seen[:4] == [(2, 2), (1, 2), (0, 1), (1, 1)] and seen[-1] == (0, 0)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_active"):
        ContinuousBatcher(lambda b: b, max_active=0)
    with pytest.raises(ValueError, match="cache_budget"):
        ContinuousBatcher(lambda b: b, max_active=1, cache_budget=0)
    with pytest.raises(ValueError, match="max_size"):
        batched(0)


# ------------------------------------------------------------------ @batched


def test_batched_fills_to_max_size() -> None:
    sizes = []

    @batched(max_size=4, max_wait=10)
    async def double(xs: list[int]) -> list[int]:
        sizes.append(len(xs))
        return [x * 2 for x in xs]

    async def main():
        return await asyncio.gather(*(double(i) for i in range(12)))

    out = asyncio.run(asyncio.wait_for(main(), 5))  # max_wait 10 s: sizes, not time
    assert out == [i * 2 for i in range(12)]
    assert sizes == [4, 4, 4]


def test_batched_starts_after_max_wait() -> None:
    sizes = []

    @batched(max_size=100, max_wait=0.05)
    async def ident(xs):
        sizes.append(len(xs))
        return xs

    async def main():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        out = await asyncio.gather(ident(1), ident(2))
        return out, loop.time() - t0

    out, took = run(main())
    assert out == [1, 2] and sizes == [2] and took >= 0.05


def test_batched_error_reaches_every_caller_and_cancelled_callers_are_left_out() -> None:
    seen = []

    @batched(max_size=3, max_wait=0.05)
    async def f(xs):
        seen.append(list(xs))
        if 0 in xs:
            raise KeyError("zero")
        return xs[:-1] if 9 in xs else xs

    async def main():
        r = await asyncio.gather(f(0), f(1), return_exceptions=True)
        assert all(isinstance(e, KeyError) for e in r)
        gone = asyncio.ensure_future(f(5))
        await asyncio.sleep(0)
        gone.cancel()
        assert await f(6) == 6
        with pytest.raises(RuntimeError, match="2 results for 3 calls"):
            await asyncio.gather(f(7), f(8), f(9))

    run(main())
    assert seen[1] == [6]


def test_batched_method_batches_per_instance() -> None:
    class Model:
        def __init__(self, k):
            self.k = k
            self.sizes = []

        @batched(max_size=8, max_wait=0.01)
        async def add(self, xs):
            self.sizes.append(len(xs))
            return [x + self.k for x in xs]

    a, b = Model(100), Model(200)

    async def main():
        return await asyncio.gather(*(m.add(i) for i in range(3) for m in (a, b)))

    assert run(main()) == [100, 200, 101, 201, 102, 202]
    assert a.sizes == [3] and b.sizes == [3]


def test_close_ends_streams_from_the_loop_or_another_thread() -> None:
    rec = Recorder()
    rec.gate = threading.Event()

    async def main(from_thread: bool):
        b = ContinuousBatcher(rec, max_active=1)
        running = asyncio.ensure_future(collect(b, "a", 10**6))
        queued = asyncio.ensure_future(collect(b, "b", 5))
        await asyncio.to_thread(rec.entered.wait, 30)
        if from_thread:
            await asyncio.to_thread(b.close)
        else:
            b.close()
        rec.gate.set()
        return await running, await queued, b.active, b.waiting

    for from_thread in (False, True):
        rec.entered.clear()
        rec.gate = threading.Event()
        assert run(main(from_thread)) == ([], [], 0, 0)


def test_batched_callers_are_cancelled_with_a_cancelled_batch() -> None:
    """A batch cancelled from inside (the function's own work cancelled)
    cancels its callers and the queued ones instead of leaving them."""

    @batched(max_size=1, max_wait=0)
    async def f(xs):
        raise asyncio.CancelledError

    async def main():
        r = await asyncio.gather(f(1), f(2), return_exceptions=True)
        return [type(e) for e in r]

    assert run(main()) == [asyncio.CancelledError, asyncio.CancelledError]


def test_streams_fail_instead_of_hanging_when_the_runner_dies() -> None:
    def on_step(active: int, outputs: int) -> None:
        raise OSError("metrics are down")

    async def main():
        b = ContinuousBatcher(lambda batch: [1] * len(batch), max_active=1, on_step=on_step)
        r = await asyncio.gather(collect(b, "a", 3), collect(b, "b", 3), return_exceptions=True)
        assert b.active == 0 and b.waiting == 0
        return [repr(e) for e in r]

    assert run(main()) == ["OSError('metrics are down')"] * 2


def test_a_step_error_raised_in_many_streams_keeps_its_traceback_short() -> None:
    """Every stream of a failing step raises the same exception object; its
    traceback must not grow by each stream's frames (64 streams made a log
    line of megabytes)."""

    def step(batch: list[Sequence[int]]) -> list[int]:
        raise ValueError("no")

    async def one(b: ContinuousBatcher, i: int) -> int:
        try:
            await collect(b, i, 3)
        except ValueError as e:
            return len(traceback.extract_tb(e.__traceback__))
        raise AssertionError("no error")

    async def main() -> list[int]:
        b = ContinuousBatcher(step, max_active=64)
        return await asyncio.gather(*(one(b, i) for i in range(64)))

    depths = run(main())
    assert max(depths) == min(depths), depths


def test_the_stepping_thread_runs_at_most_one_step_ahead_of_the_loop() -> None:
    """While the loop is busy, the thread finishes the next step but does
    not start the one after: outputs wait for the loop, not pile up."""
    rec = Recorder()
    handed: list[int] = []  # on_step: once per hand-out the loop took

    def on_step(active: int, outputs: int) -> None:
        if outputs:  # not the report of an idle batcher
            handed.append(outputs)

    async def main() -> tuple[int, int]:
        b = ContinuousBatcher(rec, max_active=1, on_step=on_step)
        stream = b.generate("a", steps=100)
        assert await stream.__anext__() == "a0"
        # Block the loop until the thread waits for it and nothing but the
        # loop can let it go on: it waits in the hand-out's semaphore, which
        # is at zero (a release not yet seen would let it run on).
        stepper = b._stepper
        deadline = time.monotonic() + 30
        while not (parked(stepper._thread) and stepper._handed._value == 0):
            assert time.monotonic() < deadline, "the stepping thread never waited"
            time.sleep(0.001)
        ahead, taken = len(rec.log), len(handed)
        await stream.aclose()
        return ahead, taken

    # The loop took step 0's outputs and was blocked before it let the
    # thread hand out again: the thread ran step 1, and not step 2.
    assert run(main()) == (2, 1)


def parked(thread: threading.Thread) -> bool:
    """Whether ``thread`` waits in a threading.Condition (a semaphore at
    zero, nothing to do)."""
    frame = sys._current_frames().get(thread.ident or 0)
    return (
        frame is not None
        and frame.f_code.co_name == "wait"
        and frame.f_code.co_filename == threading.__file__
    )


def test_the_interpreter_exits_cleanly_while_a_torch_step_runs() -> None:
    """A step still inside native code when the program ends (no close())
    is waited for: Python must not finalize under it."""
    torch = pytest.importorskip("torch")
    del torch
    script = """
import asyncio, torch
from tritonpy.batching import ContinuousBatcher
w = torch.randn(512, 512)
def step(batch):
    x = w
    for _ in range(200):
        x = torch.tanh(x @ w)
    return [float(x[0, 0])] * len(batch)
async def main():
    b = ContinuousBatcher(step, max_active=1)
    async for _ in b.generate(None, steps=10**6):
        return  # leaves while the next step computes
asyncio.run(main())
print("done")
"""
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr[-2000:]


def test_streams_arriving_in_one_loop_turn_start_in_the_same_step() -> None:
    rec = Recorder()

    async def main():
        b = ContinuousBatcher(rec, max_active=16)
        return await asyncio.gather(*(collect(b, f"s{i}", 2) for i in range(8)))

    run(main())
    assert sorted(rec.members(0)) == [f"s{i}" for i in range(8)]


def test_cancelled_is_polled_on_the_loop_thread_for_a_plain_step() -> None:
    """The official backend's request.is_cancelled is a round trip to the
    server: it is asked from the loop, never from the stepping thread."""
    threads = set()

    def cancelled() -> bool:
        threads.add(threading.current_thread())
        return False

    async def main():
        b = ContinuousBatcher(Recorder(), max_active=2)
        return await collect(b, "a", 20, cancelled=cancelled)

    assert len(run(main())) == 20
    assert threads == {threading.main_thread()}
