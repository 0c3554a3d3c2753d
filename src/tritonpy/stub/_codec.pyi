# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# Types of the compiled frame codec (stub/_codec.pyx); docs/protocol.md
# is the specification.
from typing import Any

from _typeshed import ReadableBuffer

# BEGIN generated (constants) from docs/protocol.toml by tools/gen_wire.py (make wire): do not edit
MAGIC: int
VERSION: int
HEADER_SIZE: int
MAX_FRAME: int
ARENA_REF_SIZE: int
PAD_ALIGN: int
INLINE_LIMIT: int
MAX_NDIM: int
MAX_COUNT: int
MAX_BACKEND_TEXT: int
TRUNCATED_START: str
TRUNCATED_END: str
FLAG_BODY_IN_ARENA: int
FLAG_BATCH_DONE: int
HELLO: int
INIT: int
INIT_DONE: int
ARENA: int
EXECUTE: int
RESPONSES: int
EXECUTE_DONE: int
LOG: int
FINALIZE: int
FINALIZE_DONE: int
ERROR: int
RELEASE: int
CANCEL: int
SEND_ERROR: int
IS_READY: int
READY: int
DRAIN: int
BLS_REQUEST: int
BLS_RESPONSE: int
BLS_CANCEL: int
BLS_ARENA: int
BLS_RELEASE: int
MODEL_CONTROL: int
MODEL_CONTROL_DONE: int
METRIC: int
METRIC_DONE: int
AUTO_COMPLETE: int
AUTO_COMPLETE_DONE: int
LOG_LEVELS: int
BLS_CHANNEL: int
MAX_FRAME_TYPE: int
RESP_FINAL: int
RESP_BATCH_END: int
RESP_RESCHEDULE: int
RESP_NO_RESPONSE: int
RESP_KNOWN: int
LOC_INLINE: int
LOC_ARENA: int
LOC_RECEIVER_ARENA: int
OP_FAMILY_NEW: int
OP_FAMILY_DELETE: int
OP_METRIC_NEW: int
OP_METRIC_DELETE: int
OP_INCREMENT: int
OP_SET: int
OP_OBSERVE: int
OP_VALUE: int
METRIC_COUNTER: int
METRIC_GAUGE: int
METRIC_HISTOGRAM: int
MAX_METRIC_KIND: int
LOG_INFO: int
LOG_WARN: int
LOG_ERROR: int
LOG_VERBOSE: int
LOG_LEVELS_ALL: int
JSON_TYPES: set[int]
# END generated (constants)

class ProtocolError(ValueError): ...

def clip(text: str, limit: int) -> str: ...

class OutTensor:
    """An output tensor of a RESPONSES entry (made by stub/_batch.pyx)."""

    name: str
    dtype: int
    dims: tuple[int, ...]
    data: bytes | None
    arena_id: int
    offset: int
    byte_size: int
    location: int

class Entry:
    """A RESPONSES entry (made by stub/_batch.pyx)."""

    batch_id: int
    index: int
    flags: int
    error: tuple[int, str] | None
    parameters: str
    outputs: tuple[OutTensor, ...]

# Decoded records: read-only (see _codec.pxd).

class WireTensor:
    """A decoded tensor: inline at ``offset`` in the decoded buffer, or in
    arena ``arena_id`` at ``arena_offset``."""

    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> int: ...
    @property
    def dims(self) -> tuple[int, ...]: ...
    @property
    def byte_size(self) -> int: ...
    @property
    def location(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def arena_id(self) -> int: ...
    @property
    def arena_offset(self) -> int: ...

class WireRequest:
    """A request entry of EXECUTE or BLS_REQUEST."""

    @property
    def request_id(self) -> str: ...
    @property
    def correlation_id(self) -> int | str | None: ...
    @property
    def flags(self) -> int: ...
    @property
    def timeout_us(self) -> int: ...
    @property
    def parameters(self) -> str: ...
    @property
    def requested_output_names(self) -> tuple[str, ...]: ...
    @property
    def inputs(self) -> tuple[WireTensor, ...]: ...
    @property
    def trace_context(self) -> str: ...

class BlsRequest:
    """The body of a BLS_REQUEST."""

    @property
    def model_name(self) -> str: ...
    @property
    def model_version(self) -> int: ...
    @property
    def trace_batch_id(self) -> int: ...
    @property
    def trace_request_index(self) -> int: ...
    @property
    def request(self) -> WireRequest: ...

class WireResponse:
    """A BLS_RESPONSE body or a RESPONSES entry."""

    @property
    def batch_id(self) -> int: ...
    @property
    def request_index(self) -> int: ...
    @property
    def flags(self) -> int: ...
    @property
    def has_error(self) -> bool: ...
    @property
    def error_code(self) -> int: ...
    @property
    def error_message(self) -> str: ...
    @property
    def parameters(self) -> str: ...
    @property
    def outputs(self) -> tuple[WireTensor, ...]: ...

class MetricOp:
    """One operation of a METRIC frame."""

    @property
    def op(self) -> int: ...
    @property
    def family(self) -> int: ...
    @property
    def metric(self) -> int: ...
    @property
    def kind(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def labels(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def values(self) -> tuple[float, ...]: ...
    @property
    def value(self) -> float: ...

def decode_header(buf: ReadableBuffer) -> tuple[int, int, int, int]: ...
def decode_arena_ref(buf: ReadableBuffer) -> tuple[int, int]: ...
def decode_body(ftype: int, buf: ReadableBuffer, start: int = 24) -> Any: ...

class FrameWriter:
    def begin(self, ftype: int, fid: int = 0, flags: int = 0) -> None: ...
    def begin_responses(
        self, count: int = 0, batch_id: int = 0, batch_done: bool = False
    ) -> None: ...
    def set_count(self, count: int) -> None: ...
    def set_flags(self, flags: int) -> None: ...
    def size(self) -> int: ...
    def patch_u32(self, at: int, v: int) -> None: ...
    def u8(self, v: int) -> None: ...
    def u32(self, v: int) -> None: ...
    def u64(self, v: int) -> None: ...
    def f64(self, v: float) -> None: ...
    def i64(self, v: int) -> None: ...
    def string(self, s: str | bytes) -> None: ...
    def raw(self, data: ReadableBuffer) -> None: ...
    def pad8(self) -> None: ...
    def tensor_head(self, name: str, dtype: int, dims: tuple[int, ...], byte_size: int) -> None: ...
    def tensor_inline(
        self, name: str, dtype: int, dims: tuple[int, ...], data: ReadableBuffer
    ) -> None: ...
    def tensor_arena(
        self,
        name: str,
        dtype: int,
        dims: tuple[int, ...],
        byte_size: int,
        arena_id: int,
        offset: int,
        location: int = ...,
    ) -> None: ...
    def entry(self, e: Entry) -> None: ...
    def json_body(self, obj: dict[str, Any]) -> None: ...
    def body_bytes(self) -> bytes: ...
    def finish(self) -> bytes: ...
    def finish_in_arena(self, arena_id: int, offset: int) -> bytes: ...

def encode_json(ftype: int, obj: dict[str, Any]) -> bytes: ...
def encode_simple(ftype: int, body: Any, fid: int = 0) -> bytes: ...
def log_writer(level: int, file: str, line: int, message: str) -> FrameWriter: ...
def flag_text_writer(ftype: int, fid: int, flag: bool, message: str) -> FrameWriter: ...
def error_writer(message: str) -> FrameWriter: ...
def json_writer(ftype: int, obj: dict[str, Any], fid: int = 0) -> FrameWriter: ...
def body_in_arena(frame: bytes) -> bool: ...
def encode_releases(ftype: int, refs: list[tuple[int, int]]) -> list[bytes]: ...
def metric_op_size(op: tuple[Any, ...]) -> int: ...
def encode_metric(ops: list[tuple[Any, ...]], call_id: int) -> list[bytes]: ...

# Frame types and constants added to the .pyx before they reach this file.
def __getattr__(name: str) -> Any: ...
