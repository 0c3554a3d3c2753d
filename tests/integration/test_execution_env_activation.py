# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""An execution environment is activated as the official backend does it,
through a real tritonserver: an archive laid out as conda-pack makes it
(bin/activate, bin/conda-unpack, conda-meta/, etc/conda/activate.d/,
lib/python3.X, a shared library in lib/) runs a model whose native
extension links that library; what the activation scripts export reaches
the model; the environment's lib/ is on the loader's path but not on the
LD_LIBRARY_PATH of what the model starts; an activation script that fails
fails the load, saying so.

The environment is a virtual environment of this Python made here (no
network), with the library and the extension compiled by the system's C
compiler; it sees only numpy, so the backend lends it its tritonpy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from checks import infer_json, load_models, same_path
from environments import (
    IN_MODEL_DIR,
    conda_pack_env,
    env_server,
    make_venv,
    numpy_only,
    pack,
    write_model,
)
from server import MODELS, running

ENV_NATIVE = MODELS / "env_native"


class Activated:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.cache = work / "cache"
        env = conda_pack_env(work / "conda-env", numpy_only(work / "numpy-only"))
        archive = pack(env, work / "archives" / "conda-env.tar.gz")
        broken = make_venv(work / "broken-env", numpy_only(work / "numpy-only-2"), copies=False)
        (broken / "bin" / "activate").write_text("echo 'cannot activate here' >&2\nreturn 3\n")
        repo = work / "repo"
        repo.mkdir()
        write_model(repo, "env_native", IN_MODEL_DIR, {"env.tar.gz": archive}, source=ENV_NATIVE)
        write_model(repo, "env_broken", str(broken))
        # The stubs' LD_LIBRARY_PATH before the environment's lib/ is put first.
        self.server_libs = work / "server-libs"
        self.server_libs.mkdir()
        self.server = env_server(
            repo, work, self.cache, prefix=["env", f"LD_LIBRARY_PATH={self.server_libs}"]
        )

    def load(self, name: str) -> None:
        load_models(self.server, name)

    def info(self, name: str) -> dict[str, Any]:
        return infer_json(self.server, name, "IN", np.array([1], np.int32), "INT32", "INFO")


@pytest.fixture(scope="module")
def activated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Activated]:
    a = Activated(tmp_path_factory.mktemp("activation"))
    with running(a.server):
        yield a


def test_a_conda_pack_archive_is_activated_and_its_native_library_loads(
    activated: Activated,
) -> None:
    activated.load("env_native")
    info = activated.info("env_native")
    # The extension linked lib/libtritonpy_greet.so.1, which only the
    # environment's lib/ on the loader's search path finds.
    assert info["greeting"] == "hello from libtritonpy_greet", info
    prefix = Path(info["prefix"])
    assert same_path(prefix.parent, activated.cache), info
    # bin/activate ran, and the package script it sources from
    # etc/conda/activate.d.
    assert same_path(info["conda_prefix"], prefix), info
    assert info["greet_data"] == f"{info['conda_prefix']}/share/greet", info
    assert info["path"].split(":")[0] == f"{info['conda_prefix']}/bin", info
    # As the official stub: lib/ is taken off the variable again, so the
    # model and what it starts see the server's LD_LIBRARY_PATH.
    assert info["ld_library_path"] == str(activated.server_libs), info
    assert info["child_ld_library_path"] == str(activated.server_libs), info
    assert info["marker"] is None, info
    assert activated.server.wait_log("model 'env_native': stubs run on"), activated.server.log()
    line = next(
        x for x in activated.server.log().splitlines() if "model 'env_native': stubs run on" in x
    )
    assert "activated by its bin/activate" in line and "tritonpy lent to it" in line, line


def test_an_activation_script_that_fails_fails_the_load(activated: Activated) -> None:
    with pytest.raises(InferenceServerException) as e:
        activated.load("env_broken")
    msg = str(e.value)
    assert "tritonpy: model 'env_broken': EXECUTION_ENV_PATH" in msg, msg
    activate = activated.work / "broken-env" / "bin" / "activate"
    assert f"sourcing {activate} failed with exit status 3" in msg, msg
    assert "cannot activate here" in msg, msg
    assert not activated.server.model_ready("env_broken")
    # The server and the activated model serve on.
    activated.load("env_native")
    assert activated.info("env_native")["greeting"] == "hello from libtritonpy_greet"
