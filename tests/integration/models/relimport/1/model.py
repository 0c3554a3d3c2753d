# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Reaches the files beside it the ways models written for the official
backend do: by plain name (the version directory is on sys.path) and
relative to the package the version directory makes (from . / from .parts)."""

import json

import numpy as np
import origin
import triton_python_backend_utils as pb_utils

from . import origin as origin_here
from .parts import label
from .parts.inner import two_up


class TritonPythonModel:
    def execute(self, requests):
        info = {
            "name": __name__,
            "package": __package__,
            "plain": [origin.__name__, origin.WHERE],
            "relative": [origin_here.__name__, origin_here.WHERE],
            "subpackage": label(),
            "two_up": two_up(),
        }
        out = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
