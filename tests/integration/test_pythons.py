# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub on each CPython tritonpy supports that this machine has.

There is no stub binary per Python version: the stub is `python -m
tritonpy.stub` on whatever interpreter the backend setting
python-executable names. For each CPython from requires-python on found
here (pythons.py says where it looks), tritonpy is installed from this tree
into a virtual environment of that interpreter, the stub side only; a
tritonserver with the backend of the suite's installation and that
environment as python-executable then serves a sync model, an async model
calling it through BLS, and a model telling which interpreter runs it. The
suite's own interpreter is tested as installed. Which versions ran is said
at the end of the pytest output (conftest.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from test_bls import X, Y, add_sub_inputs
from test_execution_env import infer_json

import pythons
from server import TritonServer, build_repository, running

PYTHONS, _ = pythons.discover()
MODELS = ["add_sub", "bls_add_sub_async", "env_info"]


@pytest.mark.timeout(900)  # building an environment compiles the extensions
@pytest.mark.parametrize("python", PYTHONS, ids=[p.full for p in PYTHONS])
def test_models_are_served_by_a_stub_on_each_python(tmp_path: Path, python: pythons.Python) -> None:
    # The suite's own: its virtual environment's interpreter, not resolved
    # (the real file would leave the environment's packages out).
    stub_python = Path(sys.executable) if python.own else pythons.stub_environment(python)
    prefix = stub_python.parent.parent
    srv = TritonServer(
        build_repository(tmp_path / "repo", MODELS),
        tmp_path,
        args=[
            "--model-control-mode=explicit",
            *(f"--load-model={m}" for m in MODELS),
            f"--backend-config=tritonpy,python-executable={stub_python}",
        ],
    )
    with running(srv):
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        try:
            for model in ("add_sub", "bls_add_sub_async"):
                r = c.infer(model, add_sub_inputs(X, Y))
                assert np.allclose(r.as_numpy("OUTPUT0"), X + Y), model
                assert np.allclose(r.as_numpy("OUTPUT1"), X - Y), model
        finally:
            c.close()
        info = infer_json(srv, "env_info", "IN", np.array([1], np.int32), "INT32", "INFO")
        # The model ran on that version, with that environment's tritonpy
        # (its extensions compiled for that version) and numpy.
        assert info["version"] == list(python.version[:2]), info
        assert Path(info["prefix"]).resolve() == prefix.resolve(), info
        for package in ("tritonpy", "numpy"):
            assert Path(info[package]).resolve().is_relative_to(prefix.resolve()), info
        # Every stub process of the server is that interpreter.
        stubs = srv.stubs()
        assert len(stubs) >= len(MODELS), (stubs, srv.log()[-3000:])
        for pid in stubs:
            assert os.readlink(f"/proc/{pid}/exe") == python.executable, pid
