# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Beside this file sits wave.py, named like a standard-library module.
The official stub appends the version directory to sys.path, so
``import wave`` is the library's, while ``import own_helper`` and
``from . import wave`` reach the files here. INFO reports which module each
import found and where the model's entries sit on sys.path."""

import json
import os
import sys
import wave

import numpy as np
import own_helper
import triton_python_backend_utils as pb_utils

from . import wave as wave_here

_VERSION_DIR = os.path.dirname(os.path.abspath(__file__))
_MODEL_DIR = os.path.dirname(_VERSION_DIR)


class TritonPythonModel:
    def execute(self, requests):
        path = [os.path.abspath(p) if p else p for p in sys.path]
        info = {
            "wave_is_library": not hasattr(wave, "SHADOW") and hasattr(wave, "open"),
            "relative_wave_is_local": getattr(wave_here, "SHADOW", False),
            "own_helper": own_helper.WHERE,
            # Where the version and model directories are, counted from the end.
            "tail": [len(path) - path.index(_VERSION_DIR), len(path) - path.index(_MODEL_DIR)],
            "cwd_on_path": os.getcwd() in path or "" in path,
        }
        out = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
