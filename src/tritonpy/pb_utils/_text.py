# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Text arguments as the official backend's C++ layer takes them.

Where the official API has a ``std::string`` parameter (tensor and model
names, request ids, log messages ...), pybind11 converts any str, bytes or
bytearray, so models pass numpy scalars straight from a BYTES or string
tensor (``model_name=tensor.as_numpy()[0]``). ``text`` does the same here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["describe", "text", "texts"]


def text(value: Any) -> str | None:
    """``value`` as a plain str: a str (numpy.str_ too) as it is, bytes or
    bytearray (numpy.bytes_, an object array's element) decoded as UTF-8.
    None when it is neither, or bytes that are not UTF-8: the caller
    raises its own error."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)  # numpy.str_ and other subclasses: a plain str
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def describe(value: Any) -> str:
    """What a rejected ``value`` was, for an error message."""
    if isinstance(value, (bytes, bytearray)):
        return f"{type(value).__name__} that are not UTF-8"
    return type(value).__name__


def texts(values: Any, what: str) -> list[str]:
    """Every item of the iterable ``values`` as a str (see ``text``);
    TypeError naming ``what`` for an item that is not text."""
    out = []
    for value in values:
        s = text(value)
        if s is None:
            raise TypeError(f"{what} must be str, got {describe(value)}")
        out.append(s)
    return out
