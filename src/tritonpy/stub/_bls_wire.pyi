# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Types of the compiled module _bls_wire.pyx."""

import asyncio
import collections
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tritonpy.stub._codec import WireTensor

class Call:
    id: int
    client: Any
    decoupled: bool
    responses: collections.deque
    final: bool
    future: asyncio.Future | None
    event: threading.Event | None
    deadline: float
    abandoned: bool
    control: bool
    reply: dict[str, Any] | None
    def __init__(self, client: Any, call_id: int, decoupled: bool) -> None: ...

def deadline(request: Any, grace: float) -> float: ...
def request_frame(call_id: int, request: Any, own: Any) -> bytes: ...
def encode_request(
    call_id: int,
    model_name: str,
    model_version: int,
    request_id: str,
    correlation: int | str | None,
    flags: int,
    timeout_us: int,
    parameters: str,
    requested: Sequence[str],
    inputs: list[tuple],
    own: Any = None,
    trace_batch_id: int = 0,
    trace_request_index: int = 0,
) -> bytes: ...
def response_outputs(
    outputs: tuple[WireTensor, ...],
    buf: Any,
    lease: Callable[[int, int, int], Any],
    release: Callable[[tuple[int, int]], None],
) -> list[Any]: ...
