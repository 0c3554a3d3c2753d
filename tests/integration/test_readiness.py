# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What tritonserver 2.51 does with a model's is_ready(): nothing. The
backend exports TRITONBACKEND_ModelInstanceReady (newer Triton cores call
it for model and server readiness), but 2.51 never looks it up, so no
readiness endpoint reaches the model."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from tritonpy import install as inst

from server import TritonServer, build_repository, running


def test_the_backend_exports_the_instance_readiness_entry_point(tmp_path: Path) -> None:
    lib = next(inst.backend_dir(tmp_path / "backends").glob("*/libtriton_*.so"))
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    assert " T TRITONBACKEND_ModelInstanceReady\n" in symbols, symbols


def test_triton_2_51_never_asks_is_ready(tmp_path: Path) -> None:
    srv = TritonServer(build_repository(tmp_path / "repo", ["never_ready"]), tmp_path)
    with running(srv):
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=60)
        try:
            # Every endpoint that reports readiness, and a request.
            assert c.is_server_ready() and c.is_server_live()
            assert c.is_model_ready("never_ready")
            assert c.get_model_metadata("never_ready")["name"] == "never_ready"
            x = httpclient.InferInput("IN", [1], "FP32")
            x.set_data_from_numpy(np.array([2.0], np.float32))
            assert c.infer("never_ready", [x]).as_numpy("OUT")[0] == 2.0
            assert c.is_model_ready("never_ready")
        finally:
            c.close()
    # The server has shut down: every frame the stub sent is in the log.
    assert "is_ready() was asked" not in srv.log()
