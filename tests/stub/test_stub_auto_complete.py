# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""AUTO_COMPLETE on the real stub: the model's auto_complete_config runs on
the config it is given, its failures come back with the model's name and
the traceback, and the same stub then serves the model's first instance
without importing the model again."""

from __future__ import annotations

import json
import struct
import textwrap
from pathlib import Path

import numpy as np
import pytest

import protocol_ref as P
from host import StubHost, write_model

COMPLETING = """
import os
import numpy as np
import triton_python_backend_utils as pb_utils

# Counts imports of this module, in a file beside it.
with open(os.path.join(os.path.dirname(__file__), "imports"), "a") as f:
    f.write("x")

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        pb_utils.Logger.log_info("completing")
        config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})
        config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [2]})
        config.set_max_batch_size(8)
        config.set_dynamic_batching()
        return config

    def initialize(self, args):
        self.config = json.loads(args["model_config"])

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 3)]
            )
            for r in requests
        ]
"""


def test_completion_then_init_on_the_same_stub(host: StubHost, tmp_path: Path) -> None:
    d = write_model(tmp_path, "import json\n" + textwrap.dedent(COMPLETING))
    done = host.auto_complete(d, {"name": "m", "max_batch_size": 0, "input": [], "output": []})
    assert done["ok"] is True, done
    config = json.loads(done["config"])
    assert config["max_batch_size"] == 8 and config["dynamic_batching"] == {}
    assert config["input"] == [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}]
    assert config["output"] == [{"name": "Y", "data_type": "TYPE_FP32", "dims": [2]}]
    assert any(log["message"] == "completing" for log in host.logs), host.logs

    assert host.handshake(d, config=config)["ok"] is True
    reply = host.execute(
        1, [P.request("r", [P.inline("X", 11, [1, 2], struct.pack("<2f", 1.5, -2))])]
    )
    (resp,) = reply["body"]["responses"]
    assert np.frombuffer(host.tensor_bytes(resp["outputs"][0]), np.float32).tolist() == [4.5, -6]
    # The module ran once: INIT reused the class AUTO_COMPLETE imported.
    assert (d / "imports").read_text() == "x"


def test_model_without_auto_complete_config_changes_nothing(host: StubHost, tmp_path: Path) -> None:
    d = write_model(
        tmp_path,
        """
        class TritonPythonModel:
            def execute(self, requests):
                return []
        """,
    )
    assert host.auto_complete(d, {"name": "m"}) == {"ok": True}
    assert host.handshake(d)["ok"] is True


@pytest.mark.parametrize(
    "body,needles",
    [
        (
            "raise RuntimeError('no idea what my inputs are')",
            ["RuntimeError: no idea what my inputs are", "Traceback"],
        ),
        ("return None", ["must return the pb_utils.ModelConfig", "NoneType"]),
        (
            "config.add_input({'name': 'IN', 'data_type': 'TYPE_FP32', 'dims': [4]}); "
            "return config",
            ["input 'IN'", "TYPE_INT32", "TYPE_FP32"],
        ),
        (
            "config.set_max_batch_size(2); return config",
            ["max_batch_size 16", "the 2 the model supports"],
        ),
        (
            "config.as_dict()['parameters'] = {'k': object()}; return config",
            ["TypeError", "JSON serializable"],
        ),
    ],
    ids=["raises", "returns-none", "conflicting-input", "batch-too-small", "not-json"],
)
def test_failures_name_the_model_and_say_why(
    host: StubHost, tmp_path: Path, body: str, needles: list[str]
) -> None:
    d = write_model(
        tmp_path,
        f"""
        class TritonPythonModel:
            @staticmethod
            def auto_complete_config(config):
                {body}

            def execute(self, requests):
                return []
        """,
    )
    config = {
        "name": "picky",
        "max_batch_size": 16,
        "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [4]}],
        "output": [],
    }
    done = host.auto_complete(d, config)
    assert done["ok"] is False
    assert "model 'picky'" in done["error"] and "auto_complete_config" in done["error"]
    for needle in needles:
        assert needle in done["error"], done["error"]
    # The backend closes the socket after a failure: the stub leaves quietly.
    host.sock.close()
    assert host.wait(30) == 0


def test_import_error_is_reported(host: StubHost, tmp_path: Path) -> None:
    d = write_model(tmp_path, "import no_such_module_here\n")
    done = host.auto_complete(d, {"name": "broken"})
    assert done["ok"] is False
    assert "model 'broken': importing" in done["error"] and "model.py failed" in done["error"]
    assert "ModuleNotFoundError" in done["error"] and "no_such_module_here" in done["error"]


def test_second_auto_complete_is_a_protocol_error(host: StubHost, tmp_path: Path) -> None:
    d = write_model(tmp_path, "import json\n" + textwrap.dedent(COMPLETING))
    assert host.auto_complete(d, {"name": "m"})["ok"] is True
    host.send(
        P.encode(
            P.AUTO_COMPLETE,
            {"json": {"model_name": "m", "config": "{}", "model_file": "x", "model_dir": "y"}},
        )
    )
    assert host.recv_type("ERROR")["body"]["message"].startswith("protocol error")
    assert host.wait(30) == 70
