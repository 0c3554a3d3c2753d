# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A sandboxed stub's seccomp filter and model loading API
(docs/hardening.md, "Process lifetime and the sandbox"): the kernel
interfaces a model has no use for are refused (EPERM, or ENOSYS for
clone3 and x32) while threads, fork, subprocesses, multiprocessing, numpy
and torch work; a sandboxed model may not load or unload models unless
the operator sets stub-sandbox-model-control=true, and then only models
of its own: of this backend, run sandboxed, under names that are neither
loaded nor in the model repository; and it unloads only those."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from test_sandbox_escape import plain_copy
from test_sandbox_tightens import SANDBOX

from checks import add_sub_works
from server import TritonServer, build_repository, explicit, running

MODELS = ["seccomp_probe", "add_sub"]
PLAIN = "seccomp_probe_plain"  # the same probe under the drop-in name: not sandboxed
CONTROL = "--backend-config=tritonpy,stub-sandbox-model-control=true"

OWN_MODEL = b"""import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return []
"""


def probe(srv: TritonServer, mode: str, arg: str = "", model: str = "seccomp_probe") -> dict:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        inputs = [
            httpclient.InferInput("MODE", [1], "BYTES"),
            httpclient.InferInput("ARG", [1], "BYTES"),
        ]
        inputs[0].set_data_from_numpy(np.array([mode.encode()], dtype=object))
        inputs[1].set_data_from_numpy(np.array([arg.encode()], dtype=object))
        out = json.loads(c.infer(model, inputs).as_numpy("OUT")[0])
        assert isinstance(out, dict)
        return out
    finally:
        c.close()


def server(tmp: Path, *extra: str) -> TritonServer:
    repo = build_repository(tmp / "repo", MODELS)
    plain_copy(repo, "seccomp_probe", PLAIN)
    return TritonServer(repo, tmp, args=[*explicit([*MODELS, PLAIN]), *SANDBOX, *extra])


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with running(server(tmp_path_factory.mktemp("seccomp"))) as srv:
        yield srv


@pytest.fixture(scope="module")
def controlling(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with running(server(tmp_path_factory.mktemp("seccomp_control"), CONTROL)) as srv:
        yield srv


REFUSED = {
    "io_uring_setup": errno.EPERM,
    "userfaultfd": errno.EPERM,
    "perf_event_open": errno.EPERM,
    "keyctl": errno.EPERM,
    "add_key": errno.EPERM,
    "bpf": errno.EPERM,
    "unshare_newuser": errno.EPERM,
    "clone_newuser": errno.EPERM,
    "unshare_newuser_einval": errno.EPERM,
    "clone_newuser_einval": errno.EPERM,
    "clone3": errno.ENOSYS,
    "personality_no_aslr": errno.EPERM,
    "ptrace": errno.EPERM,
    "process_vm_readv": errno.EPERM,
    "open_by_handle_at": errno.EPERM,
    "mount": errno.EPERM,
    "setns": errno.EPERM,
    "kexec_file_load": errno.EPERM,
    "finit_module": errno.EPERM,
    "swapoff": errno.EPERM,
    "acct": errno.EPERM,
    "ioctl_tiocsti": errno.EPERM,
    "io_uring_enter": errno.EPERM,
    "io_uring_register": errno.EPERM,
    "request_key": errno.EPERM,
    "name_to_handle_at": errno.EPERM,
    "process_vm_writev": errno.EPERM,
    "open_tree": errno.EPERM,
    "mount_setattr": errno.EPERM,
    "quotactl_fd": errno.EPERM,
    "iopl_0": errno.EPERM,
    "ioperm_off": errno.EPERM,
    "personality_compat_layout": errno.EPERM,
    "personality_read_implies_exec": errno.EPERM,
    "personality_page_zero": errno.EPERM,
    "ioctl_tioclinux": errno.EPERM,
    "x32_getpid": errno.ENOSYS,
}
# Calls whose capability the kernel checks before their arguments: without
# the server's capabilities, the kernel too would answer EPERM.
CAPABILITY_FIRST = {"swapoff", "acct", "kexec_file_load", "finit_module"}


def test_the_filter_refuses_what_a_model_has_no_use_for(sandboxed: TritonServer) -> None:
    out = probe(sandboxed, "syscalls")
    got = {name: out[name] for name in REFUSED}
    assert got == REFUSED, {k: errno.errorcode.get(v, v) for k, v in got.items()}
    assert out["personality_query"] == 0
    assert out["clone_plain"] == 0
    # A call of another ABI kills the process that made it.
    assert out["int80_getpid"] == -signal.SIGSYS, out["int80_getpid"]
    # The control: a plain model of the same server, with no filter, gets
    # another answer to each call (EFAULT, EBADF, EINVAL, ESRCH, ENOTTY,
    # success), so each refusal above is the sandbox's. A kernel without
    # x32 answers its call ENOSYS itself.
    plain = probe(sandboxed, "syscalls", model=PLAIN)
    same = {name for name in REFUSED if plain[name] == REFUSED[name]}
    allowed = {"x32_getpid"} | (set() if os.geteuid() == 0 else CAPABILITY_FIRST)
    assert same <= allowed, {k: errno.errorcode.get(plain[k], plain[k]) for k in same}
    assert plain["int80_getpid"] != -signal.SIGSYS, plain["int80_getpid"]


def test_ordinary_model_work_runs_under_the_filter(sandboxed: TritonServer) -> None:
    status = probe(sandboxed, "filters")
    # The uid filter of a root server's stubs, and this one.
    assert status["Seccomp"] == "2", status
    assert int(status.get("Seccomp_filters", "1")) >= 1, status
    out = probe(sandboxed, "ordinary")
    assert out["thread"] is True
    assert out["fork"] == 7
    assert out["subprocess"] == "42"
    assert out["pool"] == [1, 4, 9]
    a = np.arange(16.0).reshape(4, 4)
    assert out["numpy"] == float((a @ a).sum())
    if out["torch"] is not None:
        assert out["torch"] == 64.0 * 64 * 64
    add_sub_works(sandboxed)


def load(srv: TritonServer, name: str, backend: str, files: bool = True) -> str:
    config = {
        "backend": backend,
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}],
    }
    spec = {
        "name": name,
        "config": json.dumps(config),
        "files": {"file:1/model.py": OWN_MODEL.decode()} if files else {},
    }
    error = probe(srv, "load", json.dumps(spec))["error"]
    assert isinstance(error, str)
    return error


def test_a_sandboxed_model_may_not_load_or_unload_by_default(sandboxed: TritonServer) -> None:
    key = "stub-sandbox-model-control=false"
    assert key in load(sandboxed, "own_model", "tritonpy")
    assert not sandboxed.model_ready("own_model")
    assert key in probe(sandboxed, "unload", "add_sub")["error"]
    assert key in load(sandboxed, "add_sub", "tritonpy")
    add_sub_works(sandboxed)


def test_with_the_key_it_loads_only_sandboxed_models_of_its_own_backend(
    controlling: TritonServer,
) -> None:
    error = load(controlling, "other_backend", "python")
    assert "its config must name backend 'tritonpy'" in error and "'python'" in error, error
    assert not controlling.model_ready("other_backend")
    error = load(controlling, "add_sub", "tritonpy")
    assert "model 'add_sub' is loaded" in error, error
    error = load(controlling, "add_sub", "tritonpy", files=False)
    assert "model 'add_sub' is loaded" in error, error
    add_sub_works(controlling)
    assert load(controlling, "own_model", "tritonpy") == ""
    assert controlling.model_ready("own_model")
    assert probe(controlling, "unload", "own_model")["error"] == ""


def test_with_the_key_it_unloads_only_models_it_loaded(controlling: TritonServer) -> None:
    # add_sub is the operator's: unloading it would take it from its clients.
    error = probe(controlling, "unload", "add_sub")["error"]
    assert "a sandboxed model unloads only models it loaded" in error, error
    assert "unload_model('add_sub')" in error, error
    add_sub_works(controlling)
    # Its own model: loaded, unloaded, loaded again (a new config of its own).
    assert load(controlling, "own_again", "tritonpy") == ""
    assert probe(controlling, "unload", "own_again")["error"] == ""
    assert load(controlling, "own_again", "tritonpy") == ""
    assert controlling.model_ready("own_again")
    assert probe(controlling, "unload", "own_again")["error"] == ""


def test_with_the_key_it_puts_no_code_under_a_repository_model_s_name(
    controlling: TritonServer,
) -> None:
    # A model of the repository that is not loaded (explicit model control):
    # loading code of its own under that name would serve its clients once
    # the operator's clients ask for it.
    shutil.copytree(controlling.repo / "add_sub", controlling.repo / "not_loaded_yet")
    config = controlling.repo / "not_loaded_yet" / "config.pbtxt"
    config.write_text(config.read_text().replace('"add_sub"', '"not_loaded_yet"'))
    c = httpclient.InferenceServerClient(controlling.http_url)
    try:
        names = [m["name"] for m in c.get_model_repository_index()]
    finally:
        c.close()
    assert "not_loaded_yet" in names, names
    error = load(controlling, "not_loaded_yet", "tritonpy")
    assert "model 'not_loaded_yet' is in the model repository" in error, error
    assert not controlling.model_ready("not_loaded_yet")
    # Nor may it load the repository's model itself (no config of its own).
    error = probe(controlling, "load", json.dumps({"name": "not_loaded_yet"}))["error"]
    assert "a sandboxed model loads only models of its own" in error, error
    assert not controlling.model_ready("not_loaded_yet")
