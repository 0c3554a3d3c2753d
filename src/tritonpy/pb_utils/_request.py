# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""InferenceRequest: what execute() receives, and what a BLS call sends."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, overload

from . import _bls
from ._core import RequestCore, cancel_callbacks, init_request, keep_sender, keep_trace
from ._errors import TritonModelException
from ._params import parameters_to_json
from ._sender import InferenceResponseSender
from ._tensor import Tensor
from ._text import describe, text, texts

if TYPE_CHECKING:
    from ._bls import ResponseIterator
    from ._response import InferenceResponse

__all__ = [
    "InferenceRequest",
    "InferenceTrace",
    "PreferredMemory",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_MEMORY_CPU",
]

# PreferredMemory kinds, values as the official enum (GPU, CPU, then an
# internal "default" meaning no preference). Not TRITONSERVER_MemoryType.
TRITONSERVER_MEMORY_GPU = 0
TRITONSERVER_MEMORY_CPU = 1
_MEMORY_DEFAULT = 2

_REQUIRED: Any = object()

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX, _UINT64_MAX = 2**32 - 1, 2**64 - 1


def _integer(name: str, value: Any, least: int, most: int) -> int:
    """An integer argument of InferenceRequest as the official binding
    converts it to its C++ type: an int, or anything with ``__index__``
    (numpy integers), in the type's range. TypeError otherwise (None, a
    float, a str), as pybind11 raises."""
    if type(value) is not int:
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(
                f"InferenceRequest(): {name} must be an int, got {type(value).__name__}"
            ) from None
    if not least <= value <= most:
        raise TypeError(f"InferenceRequest(): {name} must be in [{least}, {most}], got {value}")
    return value


class PreferredMemory:
    """Where a BLS call would like its outputs (a hint)."""

    __slots__ = ("_memory_type", "_device_id")

    def __init__(self, preferred_memory_type: int, preferred_device_id: int = 0) -> None:
        if preferred_memory_type not in (
            TRITONSERVER_MEMORY_GPU,
            TRITONSERVER_MEMORY_CPU,
            _MEMORY_DEFAULT,
        ):
            raise TypeError(f"invalid preferred_memory_type {preferred_memory_type!r}")
        self._memory_type = int(preferred_memory_type)
        self._device_id = int(preferred_device_id)

    def __repr__(self) -> str:
        return f"PreferredMemory({self._memory_type}, {self._device_id})"


# No preference: every request shares it (the stub's too, stub/_batch.pyx).
DEFAULT_MEMORY = PreferredMemory(_MEMORY_DEFAULT, 0)


class InferenceTrace:
    """The trace a request belongs to; a BLS request may pass it on."""

    __slots__ = ("_context", "_batch_id", "_index")

    def __init__(self) -> None:
        self._context = ""
        # The request given to execute() whose trace this is (batch id 0:
        # none): a BLS request that passes it continues that trace.
        self._batch_id = 0
        self._index = 0

    def get_context(self) -> str | None:
        """The trace context (OpenTelemetry headers as JSON), or None."""
        return self._context or None


NO_TRACE = InferenceTrace()  # no trace; never changed, shared


def _trace_of(context: str, batch: Any, index: int) -> InferenceTrace:
    """The InferenceTrace of the ``index``-th request of the stub's batch."""
    trace = InferenceTrace()
    trace._context = context
    if batch is not None:
        trace._batch_id = batch.id
        trace._index = index
    return trace


class InferenceRequest(RequestCore):
    """An inference request.

    The constructor has the official BLS signature (keyword use is the norm;
    the positional order is the official one, request_id first).
    """

    # The fields are RequestCore's (read-only to Python), as are inputs(),
    # request_id(), set_flags() and set_release_flags().
    __slots__ = ()

    if TYPE_CHECKING:  # RequestCore's, typed for models

        def inputs(self) -> list[Tensor]: ...
        def request_id(self) -> str: ...

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: list[Tensor] = _REQUIRED,
        requested_output_names: Iterable[str] = _REQUIRED,
        model_name: str = _REQUIRED,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory = DEFAULT_MEMORY,
        trace: InferenceTrace = NO_TRACE,
        parameters: dict[str, bool | int | str] | None = None,
    ) -> None:
        # Filled by one call (the fields are RequestCore's), at most twice:
        # first the arguments as given, checked in C when they are what BLS
        # code mostly passes (it runs per BLS call); else they are checked,
        # converted or refused below and filled as they then are.
        plain = True
        params: dict[str, bool | int | str] | str | None = parameters  # JSON text once checked
        while not init_request(self, model_name, model_version, request_id, correlation_id,
                               flags, timeout, params, requested_output_names, inputs,
                               preferred_memory, trace, plain):  # fmt: skip
            plain = False
            missing = [
                n
                for n, v in (
                    ("inputs", inputs),
                    ("requested_output_names", requested_output_names),
                    ("model_name", model_name),
                )
                if v is _REQUIRED
            ]
            if missing:
                raise TypeError(
                    "InferenceRequest() missing required argument(s): " + ", ".join(missing)
                )
            # None is a TypeError for every argument but parameters, as the
            # official binding declares them (pybind11 `none(false)`); a value
            # of the wrong kind past that is its own error.
            if type(correlation_id) is not int:
                if correlation_id is None:
                    raise TypeError(
                        "InferenceRequest(): correlation_id must be an int or a str, got None"
                    )
                if isinstance(correlation_id, str):
                    correlation_id = str(correlation_id)  # numpy.str_: a plain str
                elif not isinstance(correlation_id, int):
                    raise TritonModelException("Correlation ID must be integer or string")
            model_version = _integer("model_version", model_version, _INT64_MIN, _INT64_MAX)
            flags = _integer("flags", flags, 0, _UINT32_MAX)
            timeout = _integer("timeout", timeout, 0, _UINT64_MAX)
            if preferred_memory is None or trace is None:
                which = "preferred_memory" if preferred_memory is None else "trace"
                raise TypeError(f"InferenceRequest(): {which} must not be None")
            # Text arguments take str, bytes and their numpy scalars (_text.py).
            if type(model_name) is not str:
                if (name := text(model_name)) is None:
                    raise TypeError(f"model_name must be a str, got {describe(model_name)}")
                model_name = name
            if type(request_id) is not str:
                if (rid := text(request_id)) is None:
                    raise TypeError(f"request_id must be a str, got {describe(request_id)}")
                request_id = rid
            requested_output_names = list(requested_output_names)
            for n in requested_output_names:
                if type(n) is not str:
                    requested_output_names = texts(
                        requested_output_names, "requested_output_names items"
                    )
                    break
            inputs = list(inputs)
            for t in inputs:
                if not isinstance(t, Tensor):
                    # The official backend's type for a list holding a non-Tensor.
                    raise TritonModelException(
                        f"inputs must be Tensor objects, got {type(t).__name__}"
                    )
            params = parameters_to_json(parameters)
        # The per-request state starts as RequestCore.__cinit__ sets it.

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def timeout(self) -> int:
        return self._timeout

    def parameters(self) -> str:
        """The request parameters as a JSON object text ("{}" when none)."""
        return self._parameters

    def trace(self) -> InferenceTrace:
        trace = self._trace
        if type(trace) is str:  # a request given to execute(): made on first use
            trace = _trace_of(trace, self._batch, self._index)
            keep_trace(self, trace)
        return trace

    def requested_output_names(self) -> set[str]:
        # A set, as in the official backend (it stores a std::set).
        return set(self._requested_output_names)

    def get_response_sender(self) -> InferenceResponseSender:
        """The InferenceResponseSender of this request: the way to answer it
        in decoupled mode (any number of responses, then the final flag), and
        in default mode (one response, with the final flag or followed by
        it, during execute() or after it returned)."""
        sender = self._sender
        if sender is None:
            if self._batch is None:
                raise TritonModelException(
                    f"request '{self._request_id}' has no response sender: only requests "
                    "given to execute() have one"
                )
            # Made on demand: a request that never asks for its sender
            # holds no reference cycle and is freed as soon as it ends.
            sender = InferenceResponseSender._new(self)
            keep_sender(self, sender)
        return sender

    def is_cancelled(self) -> bool:
        """Whether Triton cancelled this request (client gone, stream
        cancelled, timeout). A local flag pushed by the backend: no round trip."""
        return self._cancelled

    def add_cancel_callback(self, callback: Callable[[InferenceRequest], Any]) -> None:
        """Call ``callback(request)`` on the stub's event loop when the
        request is cancelled (at once, via the loop, if it already is)."""
        if self._cancelled:
            asyncio.get_event_loop().call_soon(callback, self)
            return
        cancel_callbacks(self).append(callback)

    async def wait_cancelled(self) -> None:
        """Return once the request is cancelled; meant for
        ``asyncio.wait``/``TaskGroup`` alongside the model's own work."""
        if self._cancelled:
            return
        fut = asyncio.get_running_loop().create_future()

        def wake(_request: InferenceRequest) -> None:
            if not fut.done():
                fut.set_result(None)

        self.add_cancel_callback(wake)
        await fut

    @overload
    def exec(self, decoupled: Literal[False] = ...) -> InferenceResponse: ...
    @overload
    def exec(self, decoupled: Literal[True]) -> ResponseIterator: ...
    @overload
    def exec(self, decoupled: bool) -> InferenceResponse | ResponseIterator: ...

    def exec(self, decoupled: bool = False) -> InferenceResponse | ResponseIterator:
        """Run this request on ``model_name`` and wait: an
        InferenceResponse, or with ``decoupled=True`` a ResponseIterator.
        Failures come back as a response whose ``has_error()`` is true."""
        return _bls.exec_request(self, decoupled)

    @overload
    def async_exec(self, decoupled: Literal[False] = ...) -> Awaitable[InferenceResponse]: ...
    @overload
    def async_exec(self, decoupled: Literal[True]) -> Awaitable[ResponseIterator]: ...
    @overload
    def async_exec(self, decoupled: bool) -> Awaitable[InferenceResponse | ResponseIterator]: ...

    def async_exec(
        self, decoupled: bool = False
    ) -> Awaitable[InferenceResponse | ResponseIterator]:
        """An awaitable of what ``exec`` returns; runs on the stub's event
        loop (no thread), so any number of calls may be in flight."""
        return _bls.async_exec_request(self, decoupled)

    def __repr__(self) -> str:
        return (
            f"InferenceRequest(model_name={self._model_name!r}, "
            f"request_id={self._request_id!r}, "
            f"inputs={[t.name() for t in self._inputs]})"
        )
