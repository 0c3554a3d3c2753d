# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""InferenceResponse: what execute() returns per request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._core import NO_OUTPUTS, ResponseCore, init_response
from ._errors import TritonError, TritonModelException
from ._params import parameters_to_json
from ._tensor import Tensor

__all__ = ["InferenceResponse"]


class InferenceResponse(ResponseCore):
    """A response: output tensors, or an error, plus optional parameters
    (a dict of str -> bool/int/str)."""

    # The fields are ResponseCore's (read-only to Python), as are __init__
    # for a plain list of tensors, output_tensors(), has_error(), error()
    # and _parameters_json().
    __slots__ = ()

    if TYPE_CHECKING:  # ResponseCore's, typed for models

        def __init__(
            self,
            output_tensors: list[Tensor] = ...,
            error: TritonError | None = None,
            parameters: dict[str, bool | int | str] | None = None,
        ) -> None: ...
        def output_tensors(self) -> list[Tensor]: ...
        def has_error(self) -> bool: ...
        def error(self) -> TritonError | None: ...

    def parameters(self) -> str:
        """The parameters as a JSON object text ("{}" when none)."""
        return self._parameters or "{}"

    def __repr__(self) -> str:
        if self._error is not None:
            return f"InferenceResponse(error={self._error!r})"
        return f"InferenceResponse({[t.name() for t in self._output_tensors]})"

    def _init_general(
        self,
        output_tensors: list[Tensor] | tuple[()] = NO_OUTPUTS,
        error: TritonError | None = None,
        parameters: dict[str, bool | int | str] | None = None,
    ) -> None:
        """``InferenceResponse(...)`` beyond ResponseCore's fast path:
        tuples, errors, parameters, and the type checks."""
        if output_tensors is NO_OUTPUTS:
            tensors: list[Tensor] = []
        elif isinstance(output_tensors, (list, tuple)):
            tensors = list(output_tensors)
        else:
            raise TypeError(
                f"output_tensors must be a list of Tensor, got {type(output_tensors).__name__}"
            )
        for t in tensors:
            if not isinstance(t, Tensor):
                # The official backend's type for a list holding a non-Tensor.
                raise TritonModelException(
                    f"output_tensors must hold Tensor objects, got {type(t).__name__}"
                )
        if error is not None and not isinstance(error, TritonError):
            raise TypeError(f"error must be a TritonError, got {type(error).__name__}")
        # "" means no parameters: nothing to put on the wire.
        text = "" if parameters is None else parameters_to_json(parameters)
        init_response(self, tensors, error, "" if text == "{}" else text)
