# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Types of the compiled module _channel.pyx."""

import asyncio
import collections
import socket
from collections.abc import Callable, Sequence

class Channel:
    sock: socket.socket
    closed: bool
    _out: collections.deque[tuple[bytes, Sequence[int]]]
    on_drained: Callable[[], None] | None
    drained_wanted: bool
    @property
    def more(self) -> bool: ...
    def __init__(
        self,
        fd: int,
        loop: asyncio.AbstractEventLoop,
        on_frame: Callable[[memoryview, list[int]], None],
        on_eof: Callable[[str], None],
        on_violation: Callable[[str], None],
    ) -> None: ...
    def start(self) -> None: ...
    def _readable(self) -> None: ...
    def send(self, frame: bytes, fds: Sequence[int] = ()) -> None: ...
    def _writable(self) -> None: ...
    def flush_blocking(self, timeout: float = 5.0) -> int: ...
    def close(self) -> None: ...
