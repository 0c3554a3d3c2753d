# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Lookups by tensor name: in requests, responses and the model config."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._request import InferenceRequest
from ._response import InferenceResponse
from ._tensor import Tensor

__all__ = [
    "get_input_tensor_by_name",
    "get_output_tensor_by_name",
    "get_input_config_by_name",
    "get_output_config_by_name",
    "using_decoupled_model_transaction_policy",
]


if TYPE_CHECKING:

    def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
        """The request's input named ``name``, or None."""

    def get_output_tensor_by_name(
        inference_response: InferenceResponse, name: str
    ) -> Tensor | None:
        """The response's output named ``name``, or None."""

else:  # compiled: they run for every input of every request, and for
    # every output of every BLS call
    from ._core import get_input_tensor_by_name, get_output_tensor_by_name


def _config_entry(model_config: dict[str, Any], section: str, name: str) -> dict[str, Any] | None:
    entry: dict[str, Any]
    for entry in model_config.get(section) or ():
        if entry.get("name") == name:
            return entry
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The ``input`` entry of the parsed model config named ``name``, or None."""
    return _config_entry(model_config, "input", name)


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The ``output`` entry of the parsed model config named ``name``, or None."""
    return _config_entry(model_config, "output", name)


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    """True if the config sets ``model_transaction_policy { decoupled: true }``."""
    policy = model_config.get("model_transaction_policy")
    if policy:
        return bool(policy.get("decoupled", False))
    return False
