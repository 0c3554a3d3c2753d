# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Request/response parameters: a dict of str -> bool/int/str, carried as JSON."""

from __future__ import annotations

import json
from typing import Any

from ._errors import TritonModelException


def parameters_to_json(parameters: Any) -> str:
    """Validate ``parameters`` (a dict or None) and return it as JSON text.

    Raises TritonModelException with the official backend's wording.
    """
    if parameters is None:
        return "{}"
    if not isinstance(parameters, dict):
        raise TritonModelException(f"Expect dict, got {type(parameters)}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(
                f"Expect parameters keys to have type str, found type {type(key)}"
            )
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(
                f"Expect parameters values to have type bool/int/str, found type {type(value)}"
            )
    return json.dumps(parameters)
