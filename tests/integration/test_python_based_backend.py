# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Python-based backends through a real tritonserver 2.51: a
backends/<name>/model.py is the code of every model that says
backend: "<name>". Triton finds no libtriton_<name>.so there, sees the
model.py, sets the model's runtime to "model.py" and loads the Python
backend's library, here tritonpy installed as backends/python; the models
bring only a config.pbtxt and an empty version directory."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

from tritonpy import install as inst

from checks import infer_json
from environments import make_venv, numpy_only, pack
from server import TritonServer, children, running

BACKEND = Path(__file__).resolve().parent / "backends" / "shout"

CONFIG = """name: "{name}"
backend: "{backend}"
max_batch_size: 0
input [ {{ name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ] }} ]
output [ {{ name: "OUT", data_type: TYPE_STRING, dims: [ 1 ] }} ]
parameters {{ key: "suffix" value {{ string_value: "{suffix}" }} }}
"""

MODELS = {"shout_a": ("shout", "!"), "shout_b": ("shout", "?!"), "shout_env": ("shout_packed", ".")}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("pybackend")
    backends = inst.backend_dir(work / "backends")  # tritonpy as `tritonpy` and `python`
    shutil.copytree(BACKEND, backends / "shout")
    # A second Python-based backend shipping its own execution environment:
    # Triton sets EXECUTION_ENV_PATH to backends/<name>/pb_exec_env_model.py.tar.gz.
    shutil.copytree(BACKEND, backends / "shout_packed")
    env = make_venv(work / "env", numpy_only(work / "numpy-only"), copies=True)
    pack(env, backends / "shout_packed" / "pb_exec_env_model.py.tar.gz")
    repo = work / "repo"
    for name, (backend, suffix) in MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        text = CONFIG.format(name=name, backend=backend, suffix=suffix)
        (repo / name / "config.pbtxt").write_text(text)
    srv = TritonServer(
        repo,
        work,
        backend_dir=backends,
        # Python-based backends take the `python` backend's settings.
        args=[f"--backend-config=python,env-cache-dir={work / 'cache'}"],
    )
    with running(srv):
        yield srv


def shout(server: TritonServer, model: str, text: str) -> dict[str, Any]:
    return infer_json(
        server, model, "TEXT", np.array([text.encode()], dtype=object), "BYTES", "OUT"
    )


def test_one_python_based_backend_serves_two_models(server: TritonServer) -> None:
    a = shout(server, "shout_a", "hello")
    b = shout(server, "shout_b", "hello")
    assert (a["text"], a["model"]) == ("HELLO!", "shout_a")
    assert (b["text"], b["model"]) == ("HELLO?!", "shout_b")
    backends = Path(server.backends)
    for info in (a, b):
        assert os.path.realpath(info["file"]) == os.path.realpath(backends / "shout" / "model.py")
        assert info["tritonpy_stub"], info  # run by tritonpy's stub
        # Forked from the backend's template, which both models share.
        assert info["forked"] and info["parent"] == server.proc.pid, info
    c = httpclient.InferenceServerClient(server.http_url)
    try:
        config = c.get_model_config("shout_a")
    finally:
        c.close()
    assert config["backend"] == "shout" and config["runtime"] == "model.py", config


def test_python_based_backend_with_its_own_execution_environment(server: TritonServer) -> None:
    info = shout(server, "shout_env", "packed")
    assert info["text"] == "PACKED."
    # Forked from a template of its own, made with the environment's
    # interpreter; the other backend's models share one.
    assert info["forked"] and info["parent"] == server.proc.pid, info
    pythons = sorted(
        Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        for pid in children(server.proc.pid, templates=True)
    )
    assert len(pythons) == 2 and any(p.startswith(info["prefix"]) for p in pythons), pythons
    cache = Path(server.backends).parent / "cache"
    assert os.path.realpath(Path(info["prefix"]).parent) == os.path.realpath(cache), info
    assert os.path.realpath(info["file"]).endswith("/shout_packed/model.py")
