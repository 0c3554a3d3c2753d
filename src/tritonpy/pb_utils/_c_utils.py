# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The module a stub serves as ``c_python_backend_utils``: the official
stub's compiled module, which a few models import directly. It holds the
API classes and functions (the same objects as ``triton_python_backend_utils``)
and ``shared_memory.free_memory()``."""

from . import (
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_GPU,
    InferenceRequest,
    InferenceResponse,
    InferenceResponseSender,
    InferenceTrace,
    Logger,
    MetricFamily,
    PreferredMemory,
    ResponseIterator,
    Tensor,
    TritonError,
    TritonModelException,
    is_model_ready,
    load_model,
    unload_model,
)
from ._stub_info import SharedMemory, shared_memory

__all__ = [
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "InferenceTrace",
    "Logger",
    "MetricFamily",
    "PreferredMemory",
    "ResponseIterator",
    "SharedMemory",
    "Tensor",
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TritonError",
    "TritonModelException",
    "is_model_ready",
    "load_model",
    "shared_memory",
    "unload_model",
]
