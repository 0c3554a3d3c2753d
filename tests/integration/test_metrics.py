# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Custom metrics through the real server: values and labels at the metrics
endpoint, errors, sharing between instances, unload and stub crashes."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient

from server import (
    TritonServer,
    build_repository,
    explicit,
    run_example_client,
    running,
    sample,
    scrape,
    wait_until,
)

MODELS = ["metrics", "metrics_pair"]
# Low caps, so that the model meets them (the defaults are 10000 and 1000).
MAX_SERIES = 60
MAX_FAMILIES = 20


@pytest.fixture(scope="module")
def metrics_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("metrics")
    srv = TritonServer(
        build_repository(work / "repo", MODELS),
        work,
        args=[
            *explicit(MODELS),
            f"--backend-config=tritonpy,metric-max-series={MAX_SERIES}",
            f"--backend-config=tritonpy,metric-max-families={MAX_FAMILIES}",
        ],
    )
    with running(srv):
        yield srv


def call(
    srv: TritonServer, model: str, mode: str, value: float = 0.0, port: int | None = None
) -> str:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        mode_in = httpclient.InferInput("MODE", [1], "BYTES")
        mode_in.set_data_from_numpy(np.array([mode.encode()], dtype=object))
        value_in = httpclient.InferInput("VALUE", [1], "FP64")
        value_in.set_data_from_numpy(np.array([value], dtype=np.float64))
        inputs = [mode_in, value_in]
        if port is not None:
            port_in = httpclient.InferInput("PORT", [1], "INT32")
            port_in.set_data_from_numpy(np.array([port], dtype=np.int32))
            inputs.append(port_in)
        out = c.infer(model, inputs).as_numpy("OUT")[0]
        return out.decode() if isinstance(out, bytes) else str(out)
    finally:
        c.close()


def control(srv: TritonServer, action: str, model: str) -> None:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        (c.load_model if action == "load" else c.unload_model)(model)
    finally:
        c.close()


def test_counter_gauge_histogram_at_the_endpoint(metrics_server: TritonServer) -> None:
    srv = metrics_server
    base = sample(scrape(srv), "tritonpy_test_requests_total", model="metrics") or 0.0
    count_before = sample(scrape(srv), "tritonpy_test_value_count", model="metrics") or 0.0
    for v in (0.5, 5.0, 50.0, 500.0):
        assert call(srv, "metrics", "update", v) == "ok"
    # Updates are sent before the response: visible once the client has it.
    text = scrape(srv)
    labels = {"model": "metrics", "origin": "test"}
    assert sample(text, "tritonpy_test_requests_total", **labels) == base + 555.5
    assert sample(text, "tritonpy_test_last_value", **labels) == 500.0
    assert sample(text, "tritonpy_test_value_count", **labels) == count_before + 4
    assert sample(text, "tritonpy_test_value_bucket", le="1", **labels) >= 1
    assert sample(text, "tritonpy_test_value_bucket", le="10", **labels) >= 2
    assert sample(text, "tritonpy_test_value_bucket", le="100", **labels) >= 3
    assert sample(text, "tritonpy_test_value_bucket", le="+Inf", **labels) >= 4
    assert "# HELP tritonpy_test_requests_total requests seen" in text
    assert "# TYPE tritonpy_test_value histogram" in text
    got = json.loads(call(srv, "metrics", "value"))
    assert got == {"requests": base + 555.5, "last": 500.0}


def test_errors_are_clear_and_the_model_keeps_serving(metrics_server: TritonServer) -> None:
    srv = metrics_server
    errors = json.loads(call(srv, "metrics", "errors"))
    assert all(errors.values()), errors  # every misuse raised
    assert "non-negative" in errors["counter_negative"]
    assert "counter 'tritonpy_test_requests_total'" in errors["counter_negative"]
    assert "model 'metrics'" in errors["counter_negative"]
    assert "set()" in errors["counter_set"]
    assert "observe()" in errors["counter_observe"] and "observe()" in errors["gauge_observe"]
    assert "increment()" in errors["histogram_increment"]
    assert "set()" in errors["histogram_set"]
    assert "value()" in errors["histogram_value"]
    assert "buckets" in errors["histogram_no_buckets"]
    assert "only histograms take buckets" in errors["counter_buckets"]
    assert "str to str" in errors["label_not_str"]
    assert "kind" in errors["bad_kind"]
    # Triton refuses a second kind for one name; the server's reason is kept.
    assert "tritonpy_test_requests_total" in errors["kind_clash"]
    assert "different type" in errors["kind_clash"], errors["kind_clash"]
    base = sample(scrape(srv), "tritonpy_test_requests_total", model="metrics")
    assert call(srv, "metrics", "update", 1.0) == "ok"
    assert sample(scrape(srv), "tritonpy_test_requests_total", model="metrics") == base + 1


def test_dropped_objects_leave_the_endpoint(metrics_server: TritonServer) -> None:
    srv = metrics_server
    assert json.loads(call(srv, "metrics", "temp", 3.0)) == {"temp": 3.0}
    # Collected after the request: deleted on the stub's next loop turn.
    wait_until(lambda: sample(scrape(srv), "tritonpy_test_temp", model="temp") is None, 60)
    assert json.loads(call(srv, "metrics", "temp", 2.0)) == {"temp": 2.0}  # made anew


def test_burst_of_updates_is_counted_exactly(metrics_server: TritonServer) -> None:
    """3000 increments and observations in one execute all arrive. The
    cost per call (a round trip to the backend each) is printed, not
    asserted: on a loaded machine wall-clock time says little."""
    srv = metrics_server
    text = scrape(srv)
    base = sample(text, "tritonpy_test_requests_total", model="metrics")
    count = sample(text, "tritonpy_test_value_count", model="metrics")
    cost = json.loads(call(srv, "metrics", "burst", 3000.0))
    text = scrape(srv)
    assert sample(text, "tritonpy_test_requests_total", model="metrics") == base + 3000
    assert sample(text, "tritonpy_test_value_count", model="metrics") == count + 3000
    print(f"per call: increment {cost['increment_ns']:.0f} ns, observe {cost['observe_ns']:.0f} ns")


def test_an_update_is_at_the_endpoint_when_the_call_returns(metrics_server: TritonServer) -> None:
    """The model observes a value and at once scrapes the metrics endpoint
    itself (as upstream's custom_metrics QA does): the count it reads
    includes its observation."""
    srv = metrics_server
    for _ in range(5):
        before = sample(scrape(srv), "tritonpy_test_value_count", model="metrics") or 0.0
        seen = json.loads(call(srv, "metrics", "scrape", 3.0, port=srv.metrics_port))
        assert seen == before + 1


def test_a_metric_whose_family_was_dropped_raises(metrics_server: TritonServer) -> None:
    errors = json.loads(call(srv := metrics_server, "metrics", "orphan"))
    official = "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."
    for op in ("increment", "set", "value"):
        assert errors[op] is not None and official in errors[op], errors
        assert "model 'metrics'" in errors[op]
    # Its series went with the family.
    wait_until(lambda: sample(scrape(srv), "tritonpy_test_orphan", model="metrics") is None)


def test_a_model_cannot_touch_another_models_series(metrics_server: TritonServer) -> None:
    srv = metrics_server
    base = sample(scrape(srv), "tritonpy_test_requests_total", model="metrics")
    errors = json.loads(call(srv, "metrics_pair", "steal"))
    assert errors["series"] is not None and "belongs to model 'metrics'" in errors["series"]
    assert errors["description"] is not None, errors
    assert "registered by model 'metrics'" in errors["description"], errors
    assert sample(scrape(srv), "tritonpy_test_requests_total", model="metrics") == base
    # The model itself may make its series again (its instances share them),
    # and give its own family a second description (the first is kept).
    assert json.loads(call(srv, "metrics", "steal")) == {"series": None, "description": None}


def test_series_and_families_per_model_are_capped(metrics_server: TritonServer) -> None:
    srv = metrics_server
    first = json.loads(call(srv, "metrics", "fill"))
    assert 0 < first["series"] < MAX_SERIES, first
    assert "metric-max-series" in first["series_error"] and "'metrics'" in first["series_error"]
    assert 0 < first["families"] < MAX_FAMILIES, first
    assert "metric-max-families" in first["families_error"], first
    # What the model dropped counts no more; the other model has its own allowance.
    again = json.loads(call(srv, "metrics", "fill"))
    assert (again["series"], again["families"]) == (first["series"], first["families"])
    pair = json.loads(call(srv, "metrics_pair", "fill"))
    assert 0 < pair["series"] < MAX_SERIES and 0 < pair["families"] < MAX_FAMILIES, pair
    assert call(srv, "metrics", "update", 1.0) == "ok"


def test_two_instances_share_one_series(metrics_server: TritonServer) -> None:
    srv = metrics_server
    text = scrape(srv)
    pids = {
        sample(text, "tritonpy_test_stub", model="metrics_pair", pid=str(p))
        for p in {int(call(srv, "metrics_pair", "pid")) for _ in range(8)}
    }
    assert pids == {1.0}
    base = sample(text, "tritonpy_test_requests_total", model="metrics_pair") or 0.0
    for _ in range(20):
        call(srv, "metrics_pair", "update", 1.0)
    # Both instances created the family and the series; there is one line.
    text = scrape(srv)
    lines = [
        ln
        for ln in text.splitlines()
        if ln.startswith("tritonpy_test_requests_total{") and "metrics_pair" in ln
    ]
    assert len(lines) == 1, lines
    assert sample(text, "tritonpy_test_requests_total", model="metrics_pair") == base + 20
    assert json.loads(call(srv, "metrics_pair", "value"))["requests"] == base + 20
    stub_lines = [
        ln
        for ln in text.splitlines()
        if ln.startswith("tritonpy_test_stub{") and "metrics_pair" in ln
    ]
    assert len(stub_lines) == 2, stub_lines


def test_stub_crash_frees_its_metrics(metrics_server: TritonServer) -> None:
    srv = metrics_server
    old = int(call(srv, "metrics", "pid"))
    assert sample(scrape(srv), "tritonpy_test_stub", model="metrics", pid=str(old)) == 1.0
    call(srv, "metrics", "update", 7.0)
    os.kill(old, signal.SIGKILL)

    def restarted() -> bool:
        try:
            return int(call(srv, "metrics", "pid")) != old
        except Exception:  # noqa: BLE001 - the instance is restarting
            return False

    wait_until(restarted)
    new = int(call(srv, "metrics", "pid"))
    text = scrape(srv)
    assert sample(text, "tritonpy_test_stub", model="metrics", pid=str(old)) is None
    assert sample(text, "tritonpy_test_stub", model="metrics", pid=str(new)) == 1.0
    # The restarted stub created the series again, from zero.
    assert sample(text, "tritonpy_test_requests_total", model="metrics") == 0.0
    assert call(srv, "metrics", "update", 2.0) == "ok"
    assert sample(scrape(srv), "tritonpy_test_requests_total", model="metrics") == 2.0


def test_unload_removes_the_series(metrics_server: TritonServer) -> None:
    srv = metrics_server
    call(srv, "metrics_pair", "update", 1.0)
    assert sample(scrape(srv), "tritonpy_test_requests_total", model="metrics_pair") is not None
    control(srv, "unload", "metrics_pair")
    wait_until(lambda: not srv.model_ready("metrics_pair"))
    wait_until(
        lambda: (
            not [
                ln
                for ln in scrape(srv).splitlines()
                if ln.startswith("tritonpy_test") and "metrics_pair" in ln
            ]
        )
    )
    text = scrape(srv)
    assert sample(text, "tritonpy_test_requests_total", model="metrics") is not None
    control(srv, "load", "metrics_pair")
    assert call(srv, "metrics_pair", "update", 3.0) == "ok"
    assert sample(scrape(srv), "tritonpy_test_requests_total", model="metrics_pair") == 3.0


def test_example_client(tmp_path_factory: pytest.TempPathFactory) -> None:
    """examples/custom_metrics: its own client against a server serving it."""
    work = tmp_path_factory.mktemp("metrics_example")
    srv = TritonServer(build_repository(work / "repo", ["custom_metrics"]), work)
    try:
        srv.wait_ready()
        out = run_example_client(
            "custom_metrics",
            "--http",
            srv.http_url,
            "--metrics",
            f"localhost:{srv.metrics_port}",
            oks=None,
        )
        assert 'custom_metrics_requests_total{model="custom_metrics"} 5' in out, out
        assert "custom_metrics_latency_seconds_count" in out
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]
