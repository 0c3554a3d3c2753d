# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Custom metrics at the protocol level: what the stub sends, when, and
how it waits (the test host plays the backend)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

import protocol_ref as P
from host import StubHost, write_model


@pytest.fixture
def host(host: StubHost) -> StubHost:
    """conftest.py's host, keeping what the stub asks of the metrics API."""
    host.metric_frames = []  # type: ignore[attr-defined]
    host.replies = {}  # type: ignore[attr-defined]  # op code -> reply body
    return host


def until(host: StubHost, ftype: str) -> dict[str, Any]:
    """Frames up to the next ``ftype``; METRIC frames are kept in order in
    host.metric_frames and calls answered (ok, value 7.5 unless the test
    set host.replies[op])."""
    while True:
        f = host.recv()
        if f["type"] == "METRIC":
            host.metric_frames.append(f)
            if f["id"]:
                last = f["body"]["ops"][-1]["op"]
                reply = host.replies.get(last, {"ok": 1, "error": "", "value": 7.5})
                host.send(P.encode(P.METRIC_DONE, reply, id=f["id"]))
            continue
        if f["type"] == ftype:
            return f
        if f["type"] != "ARENA":
            raise AssertionError(f"expected {ftype}, got {f}")


def start(host: StubHost, d: Path) -> dict[str, Any]:
    assert host.recv_type("HELLO")
    args = {
        "model_config": json.dumps({"name": "m"}),
        "model_instance_kind": "CPU",
        "model_instance_name": "t_0",
        "model_instance_device_id": "0",
        "model_repository": str(d.parent),
        "model_version": "1",
        "model_name": "m",
    }
    host.send(
        P.encode(
            P.INIT,
            {
                "json": {
                    "args": args,
                    "model_file": str(d / "model.py"),
                    "model_dir": str(d),
                    "settings": {"decoupled": False},
                }
            },
        )
    )
    return until(host, "INIT_DONE")["body"]["json"]


def ops(host: StubHost) -> list[dict[str, Any]]:
    return [op for f in host.metric_frames for op in f["body"]["ops"]]


MODEL = """
    import threading
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.families = [  # kept: a collected family takes its metrics with it
                pb_utils.MetricFamily("c_total", "a counter", pb_utils.MetricFamily.COUNTER),
                pb_utils.MetricFamily("g", "a gauge", pb_utils.MetricFamily.GAUGE),
                pb_utils.MetricFamily("h", "a histogram", pb_utils.MetricFamily.HISTOGRAM),
            ]
            self.c = self.families[0].Metric({"model": "m"})
            self.g = self.families[1].Metric()
            self.h = self.families[2].Metric({"k": "v"}, buckets=[1, 2.5])

        def execute(self, requests):
            out = []
            for request in requests:
                mode = request.request_id()
                value = 0.0
                if mode == "updates":
                    for _ in range(3):
                        self.c.increment(1)
                    self.g.increment(100)
                    self.g.set(5)
                    self.g.increment(2)
                    self.h.observe(0.5)
                    self.h.observe(3)
                elif mode == "threads":
                    def work():
                        for _ in range(1000):
                            self.c.increment(1)
                    ts = [threading.Thread(target=work) for _ in range(4)]
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()
                elif mode == "value":
                    self.c.increment(4)
                    value = self.c.value()
                elif mode == "temporary":
                    family = pb_utils.MetricFamily("tmp", "gone soon", pb_utils.MetricFamily.COUNTER)
                    family.Metric({"n": "1"}).increment(2)
                elif mode == "create_fails":
                    pb_utils.MetricFamily("clash", "x", pb_utils.MetricFamily.GAUGE)
                out.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor("V", np.array([value], np.float64))]))
            return out
"""


def run(host: StubHost, batch_id: int, mode: str) -> dict[str, Any]:
    host.send(P.encode(P.EXECUTE, {"requests": [P.request(mode)]}, id=batch_id))
    return until(host, "RESPONSES")


def test_creation_waits_and_names_handles(host: StubHost, tmp_path: Path) -> None:
    assert start(host, write_model(tmp_path, MODEL))["ok"]
    created = [op for op in ops(host) if op["op"] in (P.OP_FAMILY_NEW, P.OP_METRIC_NEW)]
    assert [(op["op"], op.get("name")) for op in created] == [
        (P.OP_FAMILY_NEW, "c_total"),
        (P.OP_FAMILY_NEW, "g"),
        (P.OP_FAMILY_NEW, "h"),
        (P.OP_METRIC_NEW, None),
        (P.OP_METRIC_NEW, None),
        (P.OP_METRIC_NEW, None),
    ]
    assert all(f["id"] for f in host.metric_frames)  # each one a call
    fam_c, _, fam_h, met_c, met_g, met_h = created
    assert fam_c["kind"] == 0 and fam_h["kind"] == 2
    assert met_c["family"] == fam_c["family"] and met_c["labels"] == [["model", "m"]]
    assert met_g["labels"] == [] and met_g["buckets"] == []
    assert met_h["buckets"] == [1.0, 2.5] and met_h["family"] == fam_h["family"]
    handles = [op.get("family") if op["op"] == P.OP_FAMILY_NEW else op["metric"] for op in created]
    assert len(set(handles)) == 6 and 0 not in handles


def test_each_update_is_a_call_answered_before_the_model_goes_on(
    host: StubHost, tmp_path: Path
) -> None:
    """An update is in the server when the call returns (as on the official
    backend): one METRIC frame with a call id per update, in order."""
    start(host, write_model(tmp_path, MODEL))
    met_c, met_g, met_h = [op["metric"] for op in ops(host) if op["op"] == P.OP_METRIC_NEW]
    host.metric_frames.clear()
    run(host, 1, "updates")
    assert all(f["id"] for f in host.metric_frames)
    assert [f["body"]["ops"] for f in host.metric_frames] == [
        [{"op": P.OP_INCREMENT, "metric": met_c, "value": 1.0}],
        [{"op": P.OP_INCREMENT, "metric": met_c, "value": 1.0}],
        [{"op": P.OP_INCREMENT, "metric": met_c, "value": 1.0}],
        [{"op": P.OP_INCREMENT, "metric": met_g, "value": 100.0}],
        [{"op": P.OP_SET, "metric": met_g, "value": 5.0}],
        [{"op": P.OP_INCREMENT, "metric": met_g, "value": 2.0}],
        [{"op": P.OP_OBSERVE, "metric": met_h, "values": [0.5]}],
        [{"op": P.OP_OBSERVE, "metric": met_h, "values": [3.0]}],
    ]
    host.metric_frames.clear()
    run(host, 2, "threads")  # 4 threads x 1000 increments: none lost
    assert sum(op["value"] for op in ops(host) if op["op"] == P.OP_INCREMENT) == 4000.0


def test_a_refused_update_raises_with_the_servers_reason(host: StubHost, tmp_path: Path) -> None:
    start(host, write_model(tmp_path, MODEL))
    host.replies[P.OP_INCREMENT] = {"ok": 0, "error": "the registry said no", "value": 0.0}
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("updates")]}, id=1))
    done = until(host, "EXECUTE_DONE")["body"]
    assert done["ok"] == 0
    assert "Failed to increment metric value (model 'm'): the registry said no" in done["error"]


def test_a_metric_of_a_collected_family_raises_and_is_deleted(
    host: StubHost, tmp_path: Path
) -> None:
    start(
        host,
        write_model(
            tmp_path,
            """
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                family = pb_utils.MetricFamily("orphan", "x", pb_utils.MetricFamily.GAUGE)
                metric = family.Metric({"k": "v"})
                del family
                errors = []
                for op in (lambda: metric.increment(1), lambda: metric.set(1), metric.value):
                    try:
                        op()
                    except pb_utils.TritonModelException as e:
                        errors.append(str(e))
                return [pb_utils.InferenceResponse(error=pb_utils.TritonError("|".join(errors)))
                        for _ in requests]
    """,
        ),
    )
    host.metric_frames.clear()
    reply = run(host, 1, "x")["body"]["responses"][0]
    errors = reply["error_message"].split("|")
    assert len(errors) == 3, errors
    official = (
        "Invalid metric operation as the corresponding 'MetricFamily' has been deleted. "
        "The 'MetricFamily' object should be deleted AFTER its corresponding 'Metric' "
        "objects have been deleted."
    )
    assert errors[0].startswith(f"Failed to increment metric value: {official}"), errors
    assert errors[1].startswith(f"Failed to set metric value: {official}"), errors
    assert errors[2].startswith(f"Failed to get metric value: {official}"), errors
    # Nothing was sent for them; the metric went with its family, first.
    got = ops(host)
    fam = next(op["family"] for op in got if op["op"] == P.OP_FAMILY_NEW)
    met = next(op["metric"] for op in got if op["op"] == P.OP_METRIC_NEW)
    assert [op for op in got if op["op"] not in (P.OP_FAMILY_NEW, P.OP_METRIC_NEW)] == [
        {"op": P.OP_METRIC_DELETE, "metric": met},
        {"op": P.OP_FAMILY_DELETE, "family": fam},
    ]


def test_value_returns_the_answer(host: StubHost, tmp_path: Path) -> None:
    start(host, write_model(tmp_path, MODEL))
    met_c = next(op["metric"] for op in ops(host) if op["op"] == P.OP_METRIC_NEW)
    host.metric_frames.clear()
    resp = run(host, 1, "value")["body"]["responses"][0]
    assert struct.unpack("<d", host.tensor_bytes(resp["outputs"][0]))[0] == 7.5
    assert [f["body"]["ops"] for f in host.metric_frames] == [
        [{"op": P.OP_INCREMENT, "metric": met_c, "value": 4.0}],
        [{"op": P.OP_VALUE, "metric": met_c}],
    ]
    assert all(f["id"] for f in host.metric_frames)


def test_collected_objects_are_deleted_metric_first(host: StubHost, tmp_path: Path) -> None:
    start(host, write_model(tmp_path, MODEL))
    host.metric_frames.clear()
    run(host, 1, "temporary")
    got = ops(host)
    fam = next(op["family"] for op in got if op["op"] == P.OP_FAMILY_NEW)
    met = next(op["metric"] for op in got if op["op"] == P.OP_METRIC_NEW)
    assert {"op": P.OP_INCREMENT, "metric": met, "value": 2.0} in got
    # The deletions follow once the objects are gone (next loop iteration).
    run(host, 2, "none")
    got = ops(host)
    deletes = [op for op in got if op["op"] in (P.OP_METRIC_DELETE, P.OP_FAMILY_DELETE)]
    assert deletes == [
        {"op": P.OP_METRIC_DELETE, "metric": met},
        {"op": P.OP_FAMILY_DELETE, "family": fam},
    ]
    assert got.index(deletes[0]) > got.index({"op": P.OP_INCREMENT, "metric": met, "value": 2.0})


def test_a_refused_creation_raises_with_the_servers_reason(host: StubHost, tmp_path: Path) -> None:
    start(host, write_model(tmp_path, MODEL))
    host.replies[P.OP_FAMILY_NEW] = {
        "ok": 0,
        "error": "Family name already exists with different type",
        "value": 0.0,
    }
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("create_fails")]}, id=1))
    done = until(host, "EXECUTE_DONE")["body"]
    assert done["ok"] == 0
    assert "TritonModelException" in done["error"]
    assert "MetricFamily 'clash' (model 'm')" in done["error"]
    assert "different type" in done["error"]
