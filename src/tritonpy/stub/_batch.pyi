# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Types of the compiled module _batch.pyx."""

from typing import Any, overload

from tritonpy.stub._codec import Entry, WireRequest

class Batch:
    id: int
    requests: list[Any] | tuple[()]
    given: list[Any] | tuple[()]
    rejected: list[tuple[Any, str]] | None
    buf: Any
    task: Any
    returned: bool
    @property
    def open(self) -> int: ...
    arena_inputs: list[tuple[int, int, int, int]] | None

def make_batch(
    batch_id: int, wire: list[WireRequest], buf: Any, peer: Any, model_name: str
) -> Batch: ...
def request_from_stub(
    model_name: str,
    request_id: str,
    correlation_id: int | str,
    flags: int,
    timeout: int,
    parameters: str,
    requested_output_names: list[str],
    inputs: list[Any],
    batch: Any = None,
    index: int = 0,
    trace_context: str = "",
) -> Any: ...
def set_text_limit(limit: int) -> None: ...
def check_result(result: Any, n: int, batch: Batch) -> str: ...
@overload
def answer(
    batch: Batch, result: Any, writer: None, own: Any, model_name: str, instance: str = ""
) -> list[Entry]: ...
@overload
def answer(
    batch: Batch, result: Any, writer: Any, own: Any, model_name: str, instance: str = ""
) -> int: ...
def entry(req: Any, resp: Any, flags: int, frame_size: int, own: Any, model_name: str) -> Entry: ...
def write_entries(writer: Any, entries: list[Entry], start: int) -> int: ...

class Outbox:
    def __init__(self) -> None: ...
    def __len__(self) -> int: ...
    def put(self, entries: Any) -> bool: ...
    def take(self) -> list[Entry]: ...
    def send(self, req: Any, response: Any, flags: int, own: Any, model_name: str) -> int: ...
