# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""InferenceResponseSender: how a model answers a request on its own time.

``send()`` never waits for the backend: the response is encoded (its tensors
copied) at once and queued; the stub coalesces everything sent during one
loop iteration into one frame. It may be called from coroutines, from the
loop and from any thread, during execute() or after it has returned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core import SenderCore, init_sender

if TYPE_CHECKING:
    from ._response import InferenceResponse

__all__ = ["InferenceResponseSender"]


class InferenceResponseSender(SenderCore):
    """The response sender of one request (``request.get_response_sender()``).

    Its state (final flag sent, responses sent, a delivery error to report)
    lives in the request, where the stub also reads it. The field and
    send() are SenderCore's (_core.pyx)."""

    __slots__ = ()

    def __init__(self) -> None:
        raise TypeError("response senders come from request.get_response_sender()")

    @classmethod
    def _new(cls, request: Any) -> InferenceResponseSender:
        self = cls.__new__(cls)
        init_sender(self, request)
        return self

    if TYPE_CHECKING:  # SenderCore's, typed for models

        def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
            """Send ``response``, and/or end the request with
            ``flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL``.

            Raises TritonModelException after the final flag has been sent,
            or when the backend reported that an earlier response of this
            request could not be delivered. In default mode a request takes
            one response, with the final flag or followed by it: a second
            response, or the final flag before any, raises and ends the
            request with that error."""

    def is_cancelled(self) -> bool:
        """Whether Triton cancelled the request (a local flag, no round trip)."""
        return bool(self._request._cancelled)

    def __repr__(self) -> str:
        state = "closed" if self._request._done else "open"
        return f"<InferenceResponseSender of {self._request.request_id()!r}, {state}>"
