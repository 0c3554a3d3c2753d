# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Data type tables: Triton codes (TRITONSERVER_DataType), config strings
("TYPE_FP32"), wire strings ("FP32"), numpy dtypes and DLPack types."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "TRITON_STRING_TO_NUMPY",
    "triton_string_to_numpy",
    "numpy_to_triton_type",
    "triton_to_numpy_type",
]

# TRITONSERVER_DataType, values as in tritonserver.h.
TYPE_INVALID = 0
TYPE_BOOL = 1
TYPE_UINT8 = 2
TYPE_UINT16 = 3
TYPE_UINT32 = 4
TYPE_UINT64 = 5
TYPE_INT8 = 6
TYPE_INT16 = 7
TYPE_INT32 = 8
TYPE_INT64 = 9
TYPE_FP16 = 10
TYPE_FP32 = 11
TYPE_FP64 = 12
TYPE_BYTES = 13
TYPE_BF16 = 14

# Wire strings, as TRITONSERVER_DataTypeString() spells them.
WIRE_NAMES: dict[int, str] = {
    TYPE_INVALID: "INVALID",
    TYPE_BOOL: "BOOL",
    TYPE_UINT8: "UINT8",
    TYPE_UINT16: "UINT16",
    TYPE_UINT32: "UINT32",
    TYPE_UINT64: "UINT64",
    TYPE_INT8: "INT8",
    TYPE_INT16: "INT16",
    TYPE_INT32: "INT32",
    TYPE_INT64: "INT64",
    TYPE_FP16: "FP16",
    TYPE_FP32: "FP32",
    TYPE_FP64: "FP64",
    TYPE_BYTES: "BYTES",
    TYPE_BF16: "BF16",
}
WIRE_CODES: dict[str, int] = {v: k for k, v in WIRE_NAMES.items()}

# Element size on the wire; BYTES is variable (0 here).
ITEMSIZE: dict[int, int] = {
    TYPE_BOOL: 1,
    TYPE_UINT8: 1,
    TYPE_UINT16: 2,
    TYPE_UINT32: 4,
    TYPE_UINT64: 8,
    TYPE_INT8: 1,
    TYPE_INT16: 2,
    TYPE_INT32: 4,
    TYPE_INT64: 8,
    TYPE_FP16: 2,
    TYPE_FP32: 4,
    TYPE_FP64: 8,
    TYPE_BYTES: 0,
    TYPE_BF16: 2,
}

# numpy dtype holding each fixed-size type (little-endian, as on the wire).
# BF16 has no numpy type: its bits live in uint16 and never reach a model.
WIRE_NUMPY: dict[int, np.dtype[Any]] = {
    TYPE_BOOL: np.dtype(np.bool_),
    TYPE_UINT8: np.dtype("<u1"),
    TYPE_UINT16: np.dtype("<u2"),
    TYPE_UINT32: np.dtype("<u4"),
    TYPE_UINT64: np.dtype("<u8"),
    TYPE_INT8: np.dtype("<i1"),
    TYPE_INT16: np.dtype("<i2"),
    TYPE_INT32: np.dtype("<i4"),
    TYPE_INT64: np.dtype("<i8"),
    TYPE_FP16: np.dtype("<f2"),
    TYPE_FP32: np.dtype("<f4"),
    TYPE_FP64: np.dtype("<f8"),
    TYPE_BF16: np.dtype("<u2"),
}

# numpy (kind, itemsize) -> Triton code for fixed-size types; any byte order.
_KIND_SIZE: dict[tuple[str, int], int] = {
    ("b", 1): TYPE_BOOL,
    ("u", 1): TYPE_UINT8,
    ("u", 2): TYPE_UINT16,
    ("u", 4): TYPE_UINT32,
    ("u", 8): TYPE_UINT64,
    ("i", 1): TYPE_INT8,
    ("i", 2): TYPE_INT16,
    ("i", 4): TYPE_INT32,
    ("i", 8): TYPE_INT64,
    ("f", 2): TYPE_FP16,
    ("f", 4): TYPE_FP32,
    ("f", 8): TYPE_FP64,
}

# DLPack DLDataTypeCode values (dlpack.h).
DL_INT = 0
DL_UINT = 1
DL_FLOAT = 2
DL_BFLOAT = 4
DL_BOOL = 6

# Triton code -> (DLDataTypeCode, bits); BYTES has no DLPack form.
TO_DLPACK: dict[int, tuple[int, int]] = {
    TYPE_BOOL: (DL_BOOL, 8),
    TYPE_UINT8: (DL_UINT, 8),
    TYPE_UINT16: (DL_UINT, 16),
    TYPE_UINT32: (DL_UINT, 32),
    TYPE_UINT64: (DL_UINT, 64),
    TYPE_INT8: (DL_INT, 8),
    TYPE_INT16: (DL_INT, 16),
    TYPE_INT32: (DL_INT, 32),
    TYPE_INT64: (DL_INT, 64),
    TYPE_FP16: (DL_FLOAT, 16),
    TYPE_FP32: (DL_FLOAT, 32),
    TYPE_FP64: (DL_FLOAT, 64),
    TYPE_BF16: (DL_BFLOAT, 16),
}
FROM_DLPACK: dict[tuple[int, int], int] = {v: k for k, v in TO_DLPACK.items()}

# Config type strings -> numpy: the official module's public table, same
# name and contents (TYPE_BOOL maps to Python bool there; kept as is).
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

_TO_NUMPY: dict[int, Any] = {
    TYPE_BOOL: np.bool_,
    TYPE_UINT8: np.uint8,
    TYPE_UINT16: np.uint16,
    TYPE_UINT32: np.uint32,
    TYPE_UINT64: np.uint64,
    TYPE_INT8: np.int8,
    TYPE_INT16: np.int16,
    TYPE_INT32: np.int32,
    TYPE_INT64: np.int64,
    TYPE_FP16: np.float16,
    TYPE_FP32: np.float32,
    TYPE_FP64: np.float64,
    TYPE_BYTES: np.object_,
}

# The common case of code_of_dtype in one lookup: the native-order dtypes.
NATIVE_CODES: dict[np.dtype[Any], int] = {np.dtype(t): code for code, t in _TO_NUMPY.items()}


def code_of_dtype(dtype: np.dtype[Any]) -> int:
    """Triton code for a numpy dtype, or TYPE_INVALID if unsupported.

    object, S and U arrays are all BYTES; fixed-size types of either byte
    order map by kind and size (so np.intc, np.longlong ... work).
    """
    kind = dtype.kind
    if kind in "OSU":
        return TYPE_BYTES
    return _KIND_SIZE.get((kind, dtype.itemsize), TYPE_INVALID)


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """numpy type for a config type string: "TYPE_FP32" -> np.float32.

    KeyError for unknown strings (TYPE_BF16 included), as the official does.
    """
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int) -> Any:
    """numpy type for a Triton code; None for INVALID, BF16 or unknown."""
    try:
        return _TO_NUMPY.get(data_type)
    except TypeError:  # unhashable input
        return None


def numpy_to_triton_type(data_type: Any) -> int | None:
    """Triton code for a numpy type or dtype; None when there is none."""
    if data_type is None:  # np.dtype(None) would mean float64
        return None
    try:
        dtype = np.dtype(data_type)
    except TypeError:
        return None
    code = code_of_dtype(dtype)
    return None if code == TYPE_INVALID else code
