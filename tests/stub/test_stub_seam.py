# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A model served by the real stub can read the fields of its requests,
tensors and responses but not assign them (pb_utils/_core.pxd: readonly);
the stub's own writes go through pb_utils/_seam.pyx."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import protocol_ref as P
from host import StubHost, f32

OVERWRITER = """
import numpy as np
import triton_python_backend_utils as pb_utils

FIELDS = {
    "request": ("_inputs", "_request_id", "_flags", "_release_flags", "_done", "_cancelled",
                "_batch", "_sender", "_parameters"),
    "tensor": ("_name", "_dtype", "_dims", "_array", "_buf"),
    "response": ("_output_tensors", "_error", "_parameters"),
}

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "A")
            resp = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", a.as_numpy() + 1)])
            assigned, refused = [], []
            for what, obj in (("request", r), ("tensor", a), ("response", resp)):
                for name in FIELDS[what]:
                    try:
                        setattr(obj, name, getattr(obj, name))
                    except AttributeError as e:
                        refused.append(f"{what}.{name}: {e}")
                    else:
                        assigned.append(f"{what}.{name}")
            r.set_flags(pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END)  # official setters
            r.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL)
            if assigned or r.flags() != 2 or len(refused) != 17:
                resp = pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"assigned {assigned}; refused {refused}")
                )
            out.append(resp)
        return out
"""


def test_a_model_that_assigns_a_field_gets_an_attribute_error(
    host: StubHost, tmp_path: Path
) -> None:
    assert host.load(tmp_path, OVERWRITER)["ok"] is True
    reply = host.execute(3, [P.request("r1", [f32("A", [1, 2])])])
    (resp,) = reply["body"]["responses"]
    assert not resp["has_error"], resp["error_message"]
    (out,) = resp["outputs"]
    assert np.frombuffer(host.tensor_bytes(out), np.float32).tolist() == [2.0, 3.0]
