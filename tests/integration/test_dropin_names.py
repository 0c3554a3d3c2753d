# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Models written for the official Python backend, unchanged: how the model
file is imported (relative imports), what sys.argv holds, and the API's
module-level names (get_model_dir, TRITON_STRING_TO_NUMPY,
c_python_backend_utils) and text arguments taken from tensors."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

from tritonpy import install as inst

from checks import from_a_new_stub, infer_json, load_models, same_path
from server import (
    MODELS,
    TritonServer,
    build_repository,
    load_failure,
    running,
    sample,
    scrape,
    wait_until,
)

BACKENDS = Path(__file__).resolve().parent / "backends"

DIRINFO_CONFIG = """backend: "dirinfo"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "INFO", data_type: TYPE_STRING, dims: [ 1 ] } ]
"""

# The official module's table, as type names.
STRING_TO_NUMPY = {
    "TYPE_BOOL": "bool",
    "TYPE_UINT8": "uint8",
    "TYPE_UINT16": "uint16",
    "TYPE_UINT32": "uint32",
    "TYPE_UINT64": "uint64",
    "TYPE_INT8": "int8",
    "TYPE_INT16": "int16",
    "TYPE_INT32": "int32",
    "TYPE_INT64": "int64",
    "TYPE_FP16": "float16",
    "TYPE_FP32": "float32",
    "TYPE_FP64": "float64",
    "TYPE_STRING": "object_",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("dropin")
    models = [
        "relimport",
        "shadow_names",
        "arg_checks",
        "argv_defaults",
        "argv_required",
        "api_names",
        "text_args",
        "add_sub",
    ]
    repo = build_repository(work / "repo", models)
    # A second model with the same file names beside model.py, other contents.
    shutil.copytree(MODELS / "relimport", repo / "relimport_twin")
    (repo / "relimport_twin" / "1" / "origin.py").write_text('WHERE = "twin"\n')
    # The same code under another default_model_filename.
    shutil.copytree(MODELS / "relimport", repo / "relimport_entry")
    version = repo / "relimport_entry" / "1"
    (version / "model.py").rename(version / "entry_point.py")
    config = repo / "relimport_entry" / "config.pbtxt"
    config.write_text(config.read_text() + 'default_model_filename: "entry_point.py"\n')
    # Two models of a Python-based backend, each with its own settings.
    backends = inst.backend_dir(work / "backends")
    shutil.copytree(BACKENDS / "dirinfo", backends / "dirinfo")
    for name, version_dir, greeting in (("dirinfo_a", "1", "a"), ("dirinfo_b", "3", "b")):
        (repo / name / version_dir).mkdir(parents=True)
        (repo / name / version_dir / "settings.json").write_text(json.dumps({"greeting": greeting}))
        (repo / name / "config.pbtxt").write_text(DIRINFO_CONFIG)
    srv = TritonServer(repo, work, backend_dir=backends, args=["--model-control-mode=explicit"])
    with running(srv):
        yield srv


def info(server: TritonServer, model: str, n: int = 0) -> dict[str, Any]:
    return infer_json(server, model, "IN", np.array([n], dtype=np.int32), "INT32", "INFO")


# ----------------------------------------------------------- model import


def test_model_file_imports_its_neighbours_relatively_and_by_name(server: TritonServer) -> None:
    load_models(server, "relimport")
    got = info(server, "relimport")
    # As the official stub: module <version>.<file stem> of the package
    # made of the version directory.
    assert (got["name"], got["package"]) == ("1.model", "1"), got
    assert got["plain"] == ["origin", "relimport"]
    assert got["relative"] == ["1.origin", "relimport"]
    assert got["subpackage"] == "parts of relimport"
    assert got["two_up"] == "relimport"


def test_models_with_the_same_file_names_keep_their_own(server: TritonServer) -> None:
    load_models(server, "relimport", "relimport_twin", "relimport_entry")
    assert info(server, "relimport")["relative"] == ["1.origin", "relimport"]
    twin = info(server, "relimport_twin")
    assert twin["plain"] == ["origin", "twin"] and twin["relative"] == ["1.origin", "twin"]
    entry = info(server, "relimport_entry")
    assert (entry["name"], entry["package"], entry["two_up"]) == (
        "1.entry_point",
        "1",
        "relimport",
    )


def test_a_model_file_named_like_a_library_module_does_not_hide_it(
    server: TritonServer,
) -> None:
    """The official stub appends the version directory, then the model's
    directory, to sys.path: the library's wave wins over 1/wave.py, which
    a relative import still reaches, and files of no other name are found
    by name."""
    load_models(server, "shadow_names")
    got = info(server, "shadow_names")
    assert got["wave_is_library"] and got["relative_wave_is_local"], got
    assert got["own_helper"] == "shadow_names"
    assert got["tail"] == [2, 1], got  # ..., version directory, model directory
    assert not got["cwd_on_path"], got


def test_arguments_the_official_binding_refuses_raise_the_same_exception(
    server: TritonServer,
) -> None:
    """The argument checks of upstream's argument_validation QA, in a stub:
    None where the official binding declares an argument not-None is a
    TypeError; a list item of the wrong kind a TritonModelException."""
    load_models(server, "arg_checks")
    got = info(server, "arg_checks")
    model_exception = {
        "request_inputs_none_item",
        "response_outputs_none_item",
        "tensor_dlpack_none",
    }
    want = {
        name: "TritonModelException" if name in model_exception else "TypeError" for name in got
    }
    assert got == want


def test_python_based_backend_finds_each_models_directory(server: TritonServer) -> None:
    load_models(server, "dirinfo_a", "dirinfo_b")
    repo = server.repo
    a, b = info(server, "dirinfo_a"), info(server, "dirinfo_b")
    assert same_path(a["model_dir"], repo / "dirinfo_a" / "1"), a
    assert same_path(b["model_dir"], repo / "dirinfo_b" / "3"), b
    assert (a["settings"], b["settings"]) == ({"greeting": "a"}, {"greeting": "b"})
    # backends/<name>/model.py is a top-level module, as on the official backend.
    assert (a["name"], a["package"]) == ("model", "")


# ----------------------------------------------------------- sys.argv


def test_model_code_parsing_the_command_line_sees_no_stub_options(server: TritonServer) -> None:
    load_models(server, "argv_defaults")
    got = info(server, "argv_defaults")
    assert got == {"argv": [""], "repeat": 2, "tests_run": 4, "passed": True}


def test_model_code_exiting_in_initialize_fails_the_load(server: TritonServer) -> None:
    """argparse without its required option exits: the official backend
    fails the load with the error; so does tritonpy, and serves on."""
    message = load_failure(server, "argv_required")
    assert "SystemExit: 2" in message, message
    load_models(server, "argv_defaults")
    assert info(server, "argv_defaults")["passed"] is True


# ----------------------------------------------------------- module-level names


def test_get_model_dir_is_the_version_directory(server: TritonServer) -> None:
    load_models(server, "api_names")
    got = info(server, "api_names")
    assert same_path(got["model_dir"], server.repo / "api_names" / "1"), got
    assert got["marker"] == "beside model.py"


def test_triton_string_to_numpy_is_the_official_table(server: TritonServer) -> None:
    load_models(server, "api_names")
    assert info(server, "api_names")["types"] == STRING_TO_NUMPY


def wait_for_new_stub(server: TritonServer, old_pid: int) -> dict[str, Any]:
    """The answer to the first request a new stub of api_names serves."""
    return from_a_new_stub(lambda: info(server, "api_names"), lambda got: got["pid"], old_pid, 60)


def test_shared_memory_free_memory_is_the_same_after_a_restart(server: TritonServer) -> None:
    """The official restart test's check: free_memory() read in execute
    before and after the stub is killed and restarted."""
    load_models(server, "api_names")
    pid = info(server, "api_names")["pid"]
    os.kill(pid, signal.SIGKILL)
    first = wait_for_new_stub(server, pid)
    assert type(first["free_memory"]) is int and first["same_tensor"] is True, first
    # A large output makes an arena; afterwards some of it is free.
    info(server, "api_names", 1 << 20)
    later = info(server, "api_names")
    assert later["pid"] == first["pid"] and later["free_memory"] > 0, later
    os.kill(first["pid"], signal.SIGKILL)
    again = wait_for_new_stub(server, first["pid"])
    assert again["free_memory"] == first["free_memory"], (first, again)


# ----------------------------------------------------------- text arguments


def call_text_args(server: TritonServer, model: bytes) -> tuple[dict[str, Any], np.ndarray]:
    a = np.arange(4, dtype=np.float32)
    b = np.full(4, 10, dtype=np.float32)
    inputs = []
    for name, value, datatype in (
        ("MODEL_NAME", np.array([model], dtype=object), "BYTES"),
        ("OUTPUT_NAMES", np.array([b"OUTPUT0", b"OUTPUT1"], dtype=object), "BYTES"),
        ("INPUT0", a, "FP32"),
        ("INPUT1", b, "FP32"),
    ):
        inp = httpclient.InferInput(name, list(value.shape), datatype)
        inp.set_data_from_numpy(value)
        inputs.append(inp)
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    try:
        result = c.infer("text_args", inputs)
    finally:
        c.close()
    out = np.stack([result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")])
    return json.loads(result.as_numpy("INFO")[0]), out


def test_bls_model_name_from_a_bytes_tensor(server: TritonServer) -> None:
    """The official BLS example's call: model_name=tensor.as_numpy()[0]."""
    load_models(server, "add_sub", "text_args")
    got, out = call_text_args(server, b"add_sub")
    assert got["bls"] == "ok", got
    a, b = np.arange(4, dtype=np.float32), np.full(4, 10, dtype=np.float32)
    np.testing.assert_array_equal(out, np.stack([a + b, a - b]))


def test_text_arguments_take_bytes_and_numpy_scalars(server: TritonServer) -> None:
    load_models(server, "add_sub", "text_args")
    got, _ = call_text_args(server, b"add_sub")
    assert got["request_id"] == ["str", "text-args-call"], got
    assert got["requested"] == ["OUTPUT0", "OUTPUT1"], got
    assert got["tensor_names"] == ["A", "B", "C"], got
    assert got["error"] == "from bytes", got
    assert got["log"] is None, got
    assert got["ready"] is True, got
    assert got["metric"] == "ok", got
    wait_until(lambda: "text_args: called add_sub" in server.log())
    wait_until(lambda: (sample(scrape(server), "text_args_calls", origin="tensor") or 0) >= 1)
