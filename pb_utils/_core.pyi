# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Types of the compiled module _core.pyx."""

from collections.abc import Callable
from typing import Any

import numpy as np

class TensorCore:
    _name: str
    _dtype: int
    _dims: tuple[int, ...]
    _array: np.ndarray | None
    _buf: Any
    def __init__(self, name: str, numpy_array: np.ndarray) -> None: ...
    def name(self) -> str: ...
    def as_numpy(self) -> np.ndarray: ...

NO_OUTPUTS: tuple[()]

class ResponseCore:
    _output_tensors: list[Any]
    _error: Any
    _parameters: str
    def __init__(
        self,
        output_tensors: list[Any] = ...,
        error: Any = None,
        parameters: dict[str, bool | int | str] | None = None,
    ) -> None: ...
    def output_tensors(self) -> list[Any]: ...
    def has_error(self) -> bool: ...
    def error(self) -> Any: ...
    def _parameters_json(self) -> str: ...

class RequestCore:
    _model_name: str
    _model_version: int
    _request_id: str
    _correlation_id: int | str
    _flags: int
    _timeout: int
    _parameters: str
    _requested_output_names: list[str]
    _inputs: list[Any]
    _preferred_memory: Any
    _trace: Any
    _release_flags: int
    _cancelled: bool
    def inputs(self) -> list[Any]: ...
    def request_id(self) -> str: ...

class SenderCore:
    _request: Any
    def send(self, response: Any = None, flags: int = 0) -> None: ...

def get_input_tensor_by_name(inference_request: Any, name: str) -> Any: ...
def bind_response(general_init: Callable[..., None]) -> None: ...
def bind_tensor(general_init: Callable[[Any, str, Any], None]) -> None: ...
def bind_host(host: Any) -> None: ...
def close(request: Any) -> bool: ...
