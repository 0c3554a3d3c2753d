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
calling it through BLS, and a model telling which interpreter runs it; and,
from stubs on the suite's own Python, a model whose EXECUTION_ENV_PATH is
the suite's environment (prepared by tritonpy.exec_env on the other
Python). The suite's own interpreter is tested as installed. Which versions ran is said
at the end of the pytest output (conftest.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

import pythons
from checks import X, Y, add_sub_inputs, infer_json
from environments import write_model
from server import TritonServer, build_repository, explicit, running

PYTHONS, _ = pythons.discover()
MODELS = ["add_sub", "bls_add_sub_async", "env_info"]


@pytest.mark.timeout(900)  # building an environment compiles the extensions
@pytest.mark.parametrize("python", PYTHONS, ids=[p.full for p in PYTHONS])
def test_models_are_served_by_a_stub_on_each_python(tmp_path: Path, python: pythons.Python) -> None:
    # The suite's own: its virtual environment's interpreter, not resolved
    # (the real file would leave the environment's packages out).
    stub_python = Path(sys.executable) if python.own else pythons.stub_environment(python)
    prefix = stub_python.parent.parent
    repo = build_repository(tmp_path / "repo", MODELS)
    # And one model whose execution environment is the suite's own: the
    # backend prepares it with that Python's tritonpy.exec_env, and the
    # server runs stubs on two Pythons at once.
    write_model(repo, "env_info_own", sys.prefix)
    srv = TritonServer(
        repo,
        tmp_path,
        args=[
            *explicit([*MODELS, "env_info_own"]),
            f"--backend-config=tritonpy,python-executable={stub_python}",
            f"--backend-config=tritonpy,env-cache-dir={tmp_path / 'cache'}",
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
        own = infer_json(srv, "env_info_own", "IN", np.array([1], np.int32), "INT32", "INFO")
        assert own["version"] == list(sys.version_info[:2]), own
        assert Path(own["prefix"]).resolve() == Path(sys.prefix).resolve(), own
        line = "model 'env_info_own': stubs run on {}/bin/python3 (Python {}.{})"
        assert line.format(Path(sys.prefix).resolve(), *sys.version_info[:2]) in srv.log()
        # The stub processes of the server are those interpreters.
        exes = [os.readlink(f"/proc/{pid}/exe") for pid in srv.stubs()]
        assert len(exes) > len(MODELS), (exes, srv.log()[-3000:])
        assert exes.count(python.executable) >= len(MODELS), exes
        assert set(exes) == {python.executable, os.path.realpath(sys.executable)}, exes
