# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Request-level micro-batching: concurrent calls become one call on a list."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Queue(Generic[T, R]):
    """The calls waiting for one batched function (of one instance, for a
    method), and the task that runs them."""

    def __init__(self, fn: Callable[[list[T]], Awaitable[list[R]]], size: int, wait: float) -> None:
        self.fn = fn
        self.size = size
        self.wait = wait
        self.items: list[tuple[T, asyncio.Future[R], float]] = []
        self.runner: asyncio.Task[None] | None = None
        self.arrived: asyncio.Event | None = None

    async def call(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[R] = loop.create_future()
        self.items.append((item, fut, loop.time()))
        if self.runner is None or self.runner.done():
            self.arrived = asyncio.Event()
            self.runner = loop.create_task(self.run())
        assert self.arrived is not None
        self.arrived.set()
        return await fut

    async def run(self) -> None:
        assert self.arrived is not None
        loop = asyncio.get_running_loop()
        while self.items:
            # The batch fills for at most `wait` from its first call.
            while len(self._live()) < self.size and self.items:
                deadline = self.items[0][2] + self.wait
                self.arrived.clear()
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(self.arrived.wait(), left)
                except asyncio.TimeoutError:
                    break
            live = self._live()
            batch, self.items = live[: self.size], live[self.size :]
            if batch:
                try:
                    await self._run_batch(batch)
                except asyncio.CancelledError:
                    # The runner itself is cancelled (the loop is closing):
                    # no caller is left waiting for ever.
                    for _, fut, _ in batch + self.items:
                        fut.cancel()
                    raise

    def _live(self) -> list[tuple[T, asyncio.Future[R], float]]:
        # A caller cancelled before its batch started is left out of it.
        self.items = [entry for entry in self.items if not entry[1].done()]
        return self.items

    async def _run_batch(self, batch: list[tuple[T, asyncio.Future[R], float]]) -> None:
        try:
            results = await self.fn([item for item, _, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(
                    f"a batched function returned {len(results)} results for {len(batch)} calls"
                )
        except Exception as e:
            for _, fut, _ in batch:
                if not fut.done():
                    fut.set_exception(e)
            return
        for (_, fut, _), result in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(result)


class _Batched:
    """What :func:`batched` returns: callable with one item, and a
    descriptor, so a decorated method batches per instance."""

    def __init__(self, fn: Callable[..., Awaitable[list[Any]]], size: int, wait: float) -> None:
        self._fn = fn
        self._size = size
        self._wait = wait
        self._queue: _Queue[Any, Any] | None = None
        self._attr = f"_tritonpy_batched_{fn.__name__}_{id(self)}"
        functools.update_wrapper(self, fn)

    def __call__(self, item: Any) -> Awaitable[Any]:
        if self._queue is None:
            self._queue = _Queue(self._fn, self._size, self._wait)
        return self._queue.call(item)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        queue = instance.__dict__.get(self._attr)
        if queue is None:
            queue = _Queue(functools.partial(self._fn, instance), self._size, self._wait)
            instance.__dict__[self._attr] = queue
        return queue.call


def batched(
    max_size: int = 8, max_wait: float = 0.005
) -> Callable[[Callable[..., Awaitable[list[Any]]]], Callable[..., Awaitable[Any]]]:
    """Decorates an ``async def f(items: list) -> list`` (or a method
    ``async def f(self, items)``) so that callers call ``await f(item)``
    with one item each and get their own result, while ``f`` runs on lists
    of the items of concurrent calls.

    A batch starts once ``max_size`` calls are waiting, or ``max_wait``
    seconds after its first call, whichever comes first; one batch runs at
    a time, and calls made meanwhile form the next. ``f`` must return one
    result per item, in order. If it raises, every caller of that batch
    gets the error. A caller cancelled before its batch starts is left out.
    """
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, got {max_size}")
    if max_wait < 0:
        raise ValueError(f"max_wait must not be negative, got {max_wait}")

    def wrap(fn: Callable[..., Awaitable[list[Any]]]) -> Callable[..., Awaitable[Any]]:
        return _Batched(fn, max_size, max_wait)

    return wrap
