# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Public BYTES helpers, with the official module's results; the loops are in
the compiled ``_bytes`` module."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _bytes
from ._errors import TritonModelException

__all__ = ["serialize_byte_tensor", "deserialize_bytes_tensor"]


def serialize_byte_tensor(input_tensor: np.ndarray) -> Any:
    """Serialize an object or bytes (S) array, in C order, to ``bytes``.

    As the official function: an empty array gives ``()``, an array of any
    other dtype gives None, and object elements that are not bytes or str are
    written as ``str(element)``.
    """
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype.kind not in "OS":
        return None
    try:
        return _bytes.encode(input_tensor, False)
    except ValueError as exc:
        raise TritonModelException(f"cannot serialize BYTES tensor: {exc}") from exc


def deserialize_bytes_tensor(encoded_tensor: Any) -> np.ndarray:
    """Deserialize length-prefixed BYTES data (bytes or any C-contiguous
    buffer) into a 1-D object array of bytes."""
    if isinstance(encoded_tensor, np.ndarray) and not encoded_tensor.flags.c_contiguous:
        encoded_tensor = np.ascontiguousarray(encoded_tensor)
    try:
        return _bytes.decode(encoded_tensor, -1)
    except ValueError as exc:
        raise TritonModelException(f"malformed BYTES data: {exc}") from exc
