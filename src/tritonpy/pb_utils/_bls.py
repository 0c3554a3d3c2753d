# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Business logic scripting and the model loading API, model side.

``InferenceRequest.exec()``/``async_exec()`` and ``load_model()``,
``unload_model()``, ``is_model_ready()`` land here; the work is done by the
stub's BLS client (``tritonpy.stub.bls``), the ``bls`` part of the host the
stub attaches (_host.py). Outside a stub there is no server to call.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from . import _host
from ._errors import TritonModelException
from ._text import text

if TYPE_CHECKING:
    from ._response import InferenceResponse

__all__ = ["ResponseIterator", "load_model", "unload_model", "is_model_ready"]

_NO_STUB = "BLS and the model loading API need a running tritonpy stub"


def _need_client() -> _host.Bls:
    return _host.need(_NO_STUB).bls


class ResponseIterator:
    """The responses of a ``decoupled=True`` BLS call, as they arrive.

    Iterate with ``for`` (``exec``) or ``async for`` (``async_exec``; plain
    ``for`` works too). The last response may carry no outputs: a decoupled
    model may end its stream with the final flag alone. ``cancel()`` asks
    Triton to cancel the call; the iteration then ends, usually with a
    response whose error is CANCELLED.

    As in the official backend, the iterator keeps the responses it handed
    out: once the final one is in, a new loop over an exhausted iterator
    yields them all again from the first, and a loop over one left part-way
    resumes where it was (the responses, and their outputs, live as long as
    the iterator).
    """

    __slots__ = ("_call", "_kept", "_at")

    def __init__(self, call: Any) -> None:
        self._call = call
        self._kept: list[InferenceResponse] = []
        self._at = 0  # the next response to hand out, an index into _kept

    def _rewind(self) -> None:
        call = self._call
        if self._at >= len(self._kept) and call.final and not call.responses:
            self._at = 0

    def __iter__(self) -> ResponseIterator:
        self._rewind()
        return self

    def _keep(self, resp: InferenceResponse | None) -> InferenceResponse | None:
        if resp is not None:
            self._kept.append(resp)
            self._at += 1
        return resp

    def __next__(self) -> InferenceResponse:
        if self._at < len(self._kept):
            self._at += 1
            return self._kept[self._at - 1]
        resp = self._keep(self._call.client.next_sync(self._call))
        if resp is None:
            raise StopIteration
        return resp

    def __aiter__(self) -> ResponseIterator:
        self._rewind()
        return self

    async def __anext__(self) -> InferenceResponse:
        if self._at < len(self._kept):
            self._at += 1
            return self._kept[self._at - 1]
        resp = self._keep(await self._call.client.next_async(self._call))
        if resp is None:
            raise StopAsyncIteration
        return resp

    def cancel(self) -> None:
        self._call.client.cancel(self._call)


def exec_request(request: Any, decoupled: bool) -> Any:
    return _need_client().exec(request, decoupled)


async def async_exec_request(request: Any, decoupled: bool) -> Any:
    return await _need_client().async_exec(request, decoupled)


def _name(model_name: Any, call: str) -> str:
    """The model name argument of ``call`` as a str (bytes and numpy
    scalars taken, as in the official backend: _text.py)."""
    name = text(model_name)
    if not name:
        raise TritonModelException(f"{call}: model_name must be a non-empty str")
    return name


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load (or reload) ``model_name`` (server in explicit model control
    mode). ``config``: a model config JSON overriding the repository's;
    ``files``: ``{"file:<path in the model directory>": bytes}``, which
    needs ``config``. Raises TritonModelException on failure."""
    model_name = _name(model_name, "load_model")
    if (config_text := text(config)) is None:
        raise TritonModelException("load_model: config must be a str (model config JSON)")
    config = config_text
    msg: dict[str, Any] = {"op": "load", "model_name": model_name, "config": config}
    if files:
        enc = {}
        for raw_key, value in files.items():
            key = text(raw_key)
            if key is None or not key.startswith("file:"):
                raise TritonModelException(
                    f"load_model: file key {raw_key!r} must be a str starting with 'file:'"
                )
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise TritonModelException(f"load_model: the content of {key!r} must be bytes")
            enc[key] = base64.b64encode(bytes(value)).decode()
        if not config:
            raise TritonModelException("load_model: 'config' must be given with 'files'")
        msg["files"] = enc
    reply = _need_client().model_control(msg)
    if not reply.get("ok"):
        raise TritonModelException(f"load_model('{model_name}') failed: {reply.get('error', '')}")


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload ``model_name`` (and, with ``unload_dependents``, the models
    loaded with it). Returns without waiting for the unload to finish."""
    model_name = _name(model_name, "unload_model")
    reply = _need_client().model_control(
        {"op": "unload", "model_name": model_name, "unload_dependents": bool(unload_dependents)}
    )
    if not reply.get("ok"):
        raise TritonModelException(f"unload_model('{model_name}') failed: {reply.get('error', '')}")


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether ``model_name`` (version ``model_version``, "" for the
    server's choice) is loaded and ready."""
    model_name = _name(model_name, "is_model_ready")
    # (an int version is taken too, as before)
    version = str(model_version) if isinstance(model_version, int) else text(model_version)
    if version is None:
        raise TritonModelException("is_model_ready: model_version must be a str")
    reply = _need_client().model_control(
        {"op": "is_ready", "model_name": model_name, "model_version": version}
    )
    if not reply.get("ok"):
        raise TritonModelException(
            f"is_model_ready('{model_name}') failed: {reply.get('error', '')}"
        )
    return bool(reply.get("ready"))
