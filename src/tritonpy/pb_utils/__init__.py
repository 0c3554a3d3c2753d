# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The model-facing API, imported by models as ``triton_python_backend_utils``.

Same names and semantics as the official Triton Python backend's module.
"""

from ._bls import ResponseIterator, is_model_ready, load_model, unload_model
from ._bytes_tensor import deserialize_bytes_tensor, serialize_byte_tensor
from ._config import (
    get_input_config_by_name,
    get_input_tensor_by_name,
    get_output_config_by_name,
    get_output_tensor_by_name,
    using_decoupled_model_transaction_policy,
)
from ._dtypes import (
    TRITON_STRING_TO_NUMPY,
    numpy_to_triton_type,
    triton_string_to_numpy,
    triton_to_numpy_type,
)
from ._errors import TritonError, TritonModelException
from ._logger import Logger, LogLevel

# As in the official backend (2.51), only MetricFamily is public: kinds are
# MetricFamily.COUNTER/GAUGE/HISTOGRAM, metrics come from family.Metric().
from ._metrics import MetricFamily
from ._model_config import ModelConfig
from ._request import (
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_GPU,
    InferenceRequest,
    InferenceTrace,
    PreferredMemory,
)
from ._response import InferenceResponse
from ._sender import InferenceResponseSender
from ._stub_info import get_model_dir
from ._tensor import Tensor

# Values as in tritonserver.h.
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

__all__ = [
    "Tensor",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "ResponseIterator",
    "load_model",
    "unload_model",
    "is_model_ready",
    "Logger",
    "LogLevel",
    "MetricFamily",
    "ModelConfig",
    "InferenceTrace",
    "PreferredMemory",
    "TritonError",
    "TritonModelException",
    "get_input_tensor_by_name",
    "get_output_tensor_by_name",
    "get_input_config_by_name",
    "get_output_config_by_name",
    "using_decoupled_model_transaction_policy",
    "get_model_dir",
    "TRITON_STRING_TO_NUMPY",
    "triton_string_to_numpy",
    "numpy_to_triton_type",
    "triton_to_numpy_type",
    "serialize_byte_tensor",
    "deserialize_bytes_tensor",
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
]
