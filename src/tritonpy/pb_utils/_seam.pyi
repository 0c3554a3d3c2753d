# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Types of the compiled module _seam.pyx."""

from types import ModuleType
from typing import Any

from tritonpy import pb_utils as pb_utils
from tritonpy.pb_utils import (
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE as TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
)
from tritonpy.pb_utils._dtypes import ITEMSIZE as ITEMSIZE
from tritonpy.pb_utils._dtypes import TYPE_BYTES as TYPE_BYTES
from tritonpy.pb_utils._dtypes import WIRE_NAMES as WIRE_NAMES
from tritonpy.pb_utils._errors import SEND_SECOND_RESPONSE as SEND_SECOND_RESPONSE
from tritonpy.pb_utils._errors import TritonError as TritonError
from tritonpy.pb_utils._errors import TritonModelException as TritonModelException
from tritonpy.pb_utils._errors import execute_failed as execute_failed
from tritonpy.pb_utils._host import Arenas as Arenas
from tritonpy.pb_utils._host import Bls as Bls
from tritonpy.pb_utils._host import Host as Host
from tritonpy.pb_utils._host import Metrics as Metrics
from tritonpy.pb_utils._host import Responses as Responses
from tritonpy.pb_utils._model_config import ModelConfig as ModelConfig
from tritonpy.pb_utils._request import DEFAULT_MEMORY as DEFAULT_MEMORY
from tritonpy.pb_utils._request import InferenceRequest as InferenceRequest
from tritonpy.pb_utils._response import InferenceResponse as InferenceResponse
from tritonpy.pb_utils._tensor import Tensor as Tensor

c_utils: ModuleType

def register(host: Host) -> None: ...
def close(request: Any) -> bool: ...
def is_closed(request: Any) -> bool: ...
def batch_of(request: Any) -> Any: ...
def rescheduled(request: Any) -> bool: ...
def set_cancelled(request: Any) -> None: ...
def cancel(request: Any) -> None: ...
def send_failed(request: Any, message: str) -> None: ...
def model_name(request: Any) -> str: ...
def set_parameters_json(response: Any, parameters: str) -> None: ...
