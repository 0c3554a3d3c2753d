# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Types of the compiled module _channel.pyx."""

import asyncio
import socket
from collections.abc import Callable, Sequence
from typing import Any

class Channel:
    sock: socket.socket
    closed: bool
    def __init__(
        self,
        fd: int,
        loop: asyncio.AbstractEventLoop,
        on_eof: Callable[[str], None],
        on_violation: Callable[[str], None],
    ) -> None: ...
    def start(self, receiver: Any) -> None: ...
    def read_ready(self) -> None: ...
    def send(self, frame: bytes, fds: Sequence[int] = ()) -> None: ...
    @property
    def wants_write(self) -> bool: ...
    def write_ready(self) -> None: ...
    def flush_blocking(self, timeout: float = 5.0) -> int: ...
    def close(self) -> None: ...
