# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Error types models see: ``TritonError`` (a value carried by a response) and
``TritonModelException`` (raised by API calls)."""

from __future__ import annotations

import enum

from ._text import describe, text

__all__ = ["TritonError", "TritonModelException"]


class _ErrorCode(enum.IntEnum):
    """TRITONSERVER_Error_Code, values as in tritonserver.h."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7


class TritonError:
    """An error to return in an ``InferenceResponse``.

    Not an exception (as in the official backend): it is carried by a response.
    ``code`` is one of the class constants (``TritonError.INTERNAL`` ...);
    they are ints, so a plain int code is accepted too.
    """

    __slots__ = ("_message", "_code")

    UNKNOWN = _ErrorCode.UNKNOWN
    INTERNAL = _ErrorCode.INTERNAL
    NOT_FOUND = _ErrorCode.NOT_FOUND
    INVALID_ARG = _ErrorCode.INVALID_ARG
    UNAVAILABLE = _ErrorCode.UNAVAILABLE
    UNSUPPORTED = _ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = _ErrorCode.ALREADY_EXISTS
    CANCELLED = _ErrorCode.CANCELLED

    def __init__(self, message: str, code: int = _ErrorCode.INTERNAL) -> None:
        if type(message) is not str:
            # bytes and numpy scalars too, as in the official backend (_text.py)
            if (m := text(message)) is None:
                raise TypeError(f"TritonError message must be a str, got {describe(message)}")
            message = m
        try:
            self._code = _ErrorCode(code)
        except (ValueError, TypeError):
            raise TypeError(f"invalid TritonError code {code!r}") from None
        self._message = message

    def message(self) -> str:
        return self._message

    def code(self) -> _ErrorCode:
        return self._code

    def __str__(self) -> str:
        return self._message

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, code=TritonError.{self._code.name})"


class TritonModelException(Exception):
    """Raised by the API on misuse or failure; a model may raise it too."""

    def message(self) -> str:
        # The official class offers message(); keep it for models that call it.
        return str(self.args[0]) if self.args else ""


# Texts models, clients and scripts of the official backend compare: the
# same words here, verbatim (tritonpy's own detail, if any, goes after them).
SEND_CLOSED = "Unable to send response. Response sender has been closed."
SEND_BAD_FLAGS = "Unable to send response. Unsupported flag provided."
SEND_NEEDS_RESPONSE = (
    "Inference Response object must be provided when the response flags is set to zero."
)
SEND_SECOND_RESPONSE = (
    "Unable to send response. Non-decoupled model cannot send more than one response."
)
SEND_FINAL_FIRST = (
    "Unable to send response. Non-decoupled model cannot send complete final before "
    "sending a response."
)


def execute_failed(instance: str, message: str) -> str:
    """The error every request of a failed batch gets: ``instance`` is the
    model instance's name (e.g. add_sub_0_0)."""
    return f"Failed to process the request(s) for model '{instance}', message: {message}"
