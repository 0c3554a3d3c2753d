# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What pb_utils asks of the stub that serves the model: the ``Host``.

pb_utils runs anywhere (a model imported in a test, a notebook); what needs
a server (responses sent later, BLS, the model loading API, custom metrics,
shared memory, Triton's log, the model directory) it asks of the ``Host``
that the stub registers once, when it starts (``register``, which the seam,
_seam.pyx, passes on). Outside a stub nothing is registered and those
calls fail as they always did, with a TritonModelException that says a
stub is needed (the logger writes to stderr, ``Tensor.empty`` uses
ordinary memory, ``free_memory()`` is 0).

The stub side is tritonpy.stub.pb_host. The parts are the stub's own
objects (its engine, BLS client, metrics client, arenas): a call through
the host is one attribute lookup away from the object that does the work.
This module's ``_host`` is the one place the host is kept; a response
sender (_core.pyx) takes the host's ``responses`` from it when it is made.
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

from ._errors import TritonModelException

__all__ = ["Host", "Responses", "Bls", "Metrics", "Arenas", "register", "attached", "need"]


class Responses(Protocol):
    """Where a request's response sender sends (the stub's engine)."""

    decoupled: bool  # the model's transaction policy, known from INIT on

    def send(self, request: Any, response: Any, flags: int) -> None:
        """Queue ``response`` (or None) of ``request`` with ``flags``;
        the sender has checked both and closed the request on the final flag."""

    def broke_rule(self, request: Any, message: str) -> NoReturn:
        """A default-mode request was answered twice, or ended before any
        response: end it with ``message`` and raise TritonModelException."""


class Bls(Protocol):
    """Business logic scripting and the model loading API."""

    def exec(self, request: Any, decoupled: bool) -> Any: ...
    async def async_exec(self, request: Any, decoupled: bool) -> Any: ...
    def model_control(self, msg: dict[str, Any]) -> dict[str, Any]: ...


class Metrics(Protocol):
    """Custom metrics: each call returns once the server has applied it."""

    def model_name(self) -> str: ...
    def family_new(self, name: str, description: str, kind: int) -> int: ...
    def metric_new(
        self, family: int, labels: list[tuple[str, str]], buckets: list[float], what: str
    ) -> int: ...
    def delete_family(self, handle: int) -> None: ...
    def delete_metric(self, handle: int) -> None: ...
    def increment(self, handle: int, value: float) -> None: ...
    def set(self, handle: int, value: float) -> None: ...
    def observe(self, handle: int, value: float) -> None: ...
    def value(self, handle: int) -> float: ...


class Arenas(Protocol):
    """The shared memory the stub sends large tensors in."""

    def block(self, n: int) -> Any:
        """A writable buffer of ``n`` bytes the backend can read in place."""

    @property
    def free_bytes(self) -> int: ...


class Host(Protocol):
    """What pb_utils asks of the stub serving it."""

    responses: Responses
    bls: Bls
    metrics: Metrics
    arenas: Arenas
    # Bit n set: TRITONSERVER_LogLevel n is enabled. The stub keeps it equal
    # to Triton's log settings (the backend pushes every change).
    log_levels: int

    def log(self, level: int, file: str, line: int, message: str) -> None:
        """A line for Triton's log, from ``file``:``line`` of the model."""

    def model_dir(self) -> str:
        """The model's version directory; raises TritonModelException with
        the reason when the stub does not know it."""


_host: Host | None = None


def register(host: Host) -> None:
    """Called once by the stub (through _seam.pyx), before it imports the model."""
    global _host
    if _host is not None:
        raise RuntimeError("pb_utils is already attached to a stub")
    _host = host


def attached() -> Host | None:
    """The stub's host, or None outside a stub."""
    return _host


def need(what: str) -> Host:
    """The stub's host; outside a stub, TritonModelException(``what``)."""
    if _host is None:
        raise TritonModelException(what)
    return _host
