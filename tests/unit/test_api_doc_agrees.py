# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Where docs/api.md and the MetricFamily docstring state what the code
does, they say what it does: InferenceRequest's arguments, the dtypes a
Tensor takes, and whose series a MetricFamily may use."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import ml_dtypes
import numpy as np

from tritonpy import pb_utils

ROOT = Path(__file__).resolve().parents[2]
API = (ROOT / "docs" / "api.md").read_text()


def documented_signature(name: str) -> list[str]:
    """The parameters of the ```python block that opens ``### `name` `` in
    docs/api.md, in order; a bare ``*`` is kept as an entry."""
    section = API.split(f"### `{name}`", 1)[1]
    block = section.split("```python", 1)[1].split("```", 1)[0]
    inside = block[block.index("(") + 1 : block.rindex(")")]
    parts, depth, current = [], 0, ""
    for ch in inside:  # split at the commas outside brackets
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.split(":", 1)[0].split("=", 1)[0].strip() for p in parts if p.strip()]


def test_inference_request_arguments_are_positional_as_documented() -> None:
    """The official binding (pybind11, no kw_only marker) takes every
    argument by position: so do the code and the page."""
    params = list(inspect.signature(pb_utils.InferenceRequest.__init__).parameters.values())[1:]
    code = []
    for p in params:
        if p.kind is p.KEYWORD_ONLY and "*" not in code:
            code.append("*")
        code.append(p.name)
    assert documented_signature("InferenceRequest") == code
    x = pb_utils.Tensor("X", np.zeros(2, np.float32))
    by_position = pb_utils.InferenceRequest("r1", 7, [x], ["Y"], "m", 3, 0, 5)
    assert by_position.request_id() == "r1" and by_position.correlation_id() == 7
    assert by_position.timeout() == 5


def test_the_dtypes_a_tensor_takes_are_the_documented_ones() -> None:
    t = pb_utils.Tensor("B", np.ones(3, ml_dtypes.bfloat16))
    assert t.triton_dtype() == 14  # TRITONSERVER_TYPE_BF16
    sentence = API.split("Supported dtypes:", 1)[1].split("raises", 1)[0]
    assert "ml_dtypes.bfloat16" in sentence, sentence


def test_the_metric_family_docstring_says_what_the_backend_refuses() -> None:
    """backend/src/triton/metrics.cc refuses another model's series; the docstring
    must not promise they are shared."""
    refusal = "a model cannot use another model's series"
    assert refusal in (ROOT / "backend" / "src" / "triton" / "metrics.cc").read_text()
    doc = inspect.getdoc(pb_utils.MetricFamily) or ""
    assert refusal in " ".join(doc.split()), doc
    assert not re.search(r"in this model or another\) share", doc), doc
