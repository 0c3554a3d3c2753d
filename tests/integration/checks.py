# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Requests and checks the integration tests share: asking the test models
(crash and its kin, add_sub, env_info) and checking a server still serves.
One function per behaviour; test modules import them from here, never from
one another."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, wait_until

__all__ = [
    "X",
    "Y",
    "add_sub_inputs",
    "add_sub_works",
    "ask",
    "from_a_new_stub",
    "infer_json",
    "infer_text",
    "load_models",
    "same_path",
    "server_is_well",
    "wait_for_new_stub",
]

T = TypeVar("T")

# add_sub's inputs where the values matter little.
X = np.array([1, 2, 3, 4], np.float32)
Y = np.array([0.5, 0.25, 4, -1], np.float32)


def ask(server: TritonServer, mode: str, model: str = "crash") -> int:
    """One request to a model that takes a MODE string and answers the PID
    of its stub (crash, crash_timeout, crash_loop, hostile_barriers,
    hostile_limits...), with request id "req-<mode>"; returns that pid."""
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=30)
    try:
        inp = httpclient.InferInput("MODE", [1], "BYTES")
        inp.set_data_from_numpy(np.array([mode.encode()], dtype=object))
        return int(c.infer(model, [inp], request_id=f"req-{mode}").as_numpy("PID")[0])
    finally:
        c.close()


def wait_for_new_stub(
    server: TritonServer, old: int, timeout: float = 30, model: str = "crash"
) -> int:
    """The pid of the first stub other than ``old`` to answer ``ask(server,
    "ok", model)``; see `from_a_new_stub`."""
    return from_a_new_stub(lambda: ask(server, "ok", model), lambda pid: pid, old, timeout)


def from_a_new_stub(
    probe: Callable[[], T], pid_of: Callable[[T], int], old: int, timeout: float
) -> T:
    """The first answer of ``probe()`` that comes from a stub other than
    ``old`` (``pid_of(answer)`` says which), asked every 0.1 s while the
    stub restarts (a failed request is asked again); fails after
    ``timeout`` seconds with the last error."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            answer = probe()
            if pid_of(answer) != old:
                return answer
        except InferenceServerException as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"no new stub after {timeout}s: {last}")


def add_sub_inputs(x: np.ndarray, y: np.ndarray, **extra: np.ndarray) -> list:
    """HTTP inputs INPUT0 = ``x``, INPUT1 = ``y`` and any ``extra`` ones by
    name, typed after their numpy dtype (FP32, INT64, INT32 or BYTES)."""
    ins = []
    for name, arr in (("INPUT0", x), ("INPUT1", y), *extra.items()):
        dtype = {
            np.dtype(np.float32): "FP32",
            np.dtype(np.int64): "INT64",
            np.dtype(np.int32): "INT32",
            np.dtype(object): "BYTES",
        }[arr.dtype]
        t = httpclient.InferInput(name, list(arr.shape), dtype)
        t.set_data_from_numpy(arr)
        ins.append(t)
    return ins


def add_sub_works(server: TritonServer, timeout: float = 60.0) -> None:
    """add_sub answers [0, 1, 2, 3] + [0, 1, 2, 3] with exactly [0, 2, 4, 6]
    within ``timeout`` seconds."""
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=timeout)
    try:
        a = np.arange(4, dtype=np.float32)
        r = c.infer("add_sub", add_sub_inputs(a, a))
        assert r.as_numpy("OUTPUT0").tolist() == (a + a).tolist()
    finally:
        c.close()


def server_is_well(srv: TritonServer, *, ready: bool = True) -> None:
    """Running, live, ready (unless a model failed to load: then the server
    is not; else it is waited for, as a load the test started may still be
    under way) and serving add_sub (within 30 s)."""
    assert srv.proc.poll() is None, "tritonserver died"
    assert srv.request("GET", "/v2/health/live", timeout=5)[0] == 200
    if ready:
        wait_until(lambda: srv.request("GET", "/v2/health/ready", timeout=5)[0] == 200)
    assert srv.model_ready("add_sub")
    add_sub_works(srv, timeout=30)


def load_models(server: TritonServer, *names: str) -> None:
    """Loads ``names`` one after the other through the model control API
    (each load may take up to 120 s)."""
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    try:
        for name in names:
            c.load_model(name)
    finally:
        c.close()


def infer_text(
    server: TritonServer,
    model: str,
    name: str = "IN",
    value: np.ndarray | None = None,
    datatype: str = "INT32",
    output: str = "INFO",
) -> str:
    """One request with input `name` (by default IN = [1]); `output` as text."""
    value = np.array([1], np.int32) if value is None else value
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    try:
        inp = httpclient.InferInput(name, list(value.shape), datatype)
        inp.set_data_from_numpy(value)
        out = c.infer(model, [inp]).as_numpy(output)
    finally:
        c.close()
    assert out is not None
    return bytes(out[0]).decode()


def infer_json(
    server: TritonServer, model: str, name: str, value: np.ndarray, datatype: str, output: str
) -> dict[str, Any]:
    """One request with input `name`; the model answers JSON text in `output`."""
    info: dict[str, Any] = json.loads(infer_text(server, model, name, value, datatype, output))
    return info


def same_path(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name the same file once links are resolved."""
    return os.path.realpath(a) == os.path.realpath(b)
