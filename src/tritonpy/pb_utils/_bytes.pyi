# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
from typing import Any

import numpy as np

def encode(arr: np.ndarray, strict: bool = ...) -> bytes: ...
def decode(buf: Any, expected: int = ...) -> np.ndarray: ...
