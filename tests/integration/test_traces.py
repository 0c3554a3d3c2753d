# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Traces with tritonserver's tracing on: a request's trace context reaches
the model (OpenTelemetry mode), and a BLS call made with
trace=request.trace() is traced as a child of the caller's trace."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from server import TritonServer, build_repository, free_ports, running


def probe(srv: TritonServer, call: str = "", headers: dict[str, str] | None = None) -> str:
    """trace_probe's CONTEXT for one request."""
    with httpclient.InferenceServerClient(srv.http_url, network_timeout=60) as c:
        x = httpclient.InferInput("CALL", [1], "BYTES")
        x.set_data_from_numpy(np.array([call.encode()], dtype=object))
        return c.infer("trace_probe", [x], headers=headers).as_numpy("CONTEXT")[0].decode()


@pytest.fixture
def collector() -> Iterator[int]:
    """A stand-in OpenTelemetry collector: accepts every export; yields its
    port."""

    class Accept(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the handler's name is fixed
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    port = free_ports(1)[0]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Accept)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        httpd.shutdown()
        thread.join()


def test_context_reaches_the_model_in_opentelemetry_mode(tmp_path: Path, collector: int) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    args = [
        "--trace-config=mode=opentelemetry",
        f"--trace-config=opentelemetry,url=127.0.0.1:{collector}/v1/traces",
        "--trace-config=rate=1",
        "--trace-config=level=TIMESTAMPS",
    ]
    srv = TritonServer(build_repository(tmp_path / "repo", ["trace_probe"]), tmp_path, args=args)
    with running(srv):
        context = json.loads(
            probe(srv, headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"})
        )
        fresh = json.loads(probe(srv))
    # The model's span continues the client's trace.
    assert re.fullmatch(rf"00-{trace_id}-[0-9a-f]{{16}}-01", context["traceparent"]), context
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-\d\d", fresh["traceparent"]), fresh


def test_bls_call_is_a_child_of_the_callers_trace(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.json"
    args = [
        f"--trace-config=triton,file={trace_file}",
        "--trace-config=rate=1",
        "--trace-config=level=TIMESTAMPS",
    ]
    repo = build_repository(tmp_path / "repo", ["trace_probe", "identity"])
    srv = TritonServer(repo, tmp_path, args=args)
    with running(srv):
        # Triton mode keeps no context: the model sees None.
        assert probe(srv, call="identity") == ""
    entries = json.loads(trace_file.read_text())
    models = {e["id"]: e for e in entries if "model_name" in e}
    caller = [e for e in models.values() if e["model_name"] == "trace_probe"]
    callee = [e for e in models.values() if e["model_name"] == "identity"]
    assert len(caller) == 1 and len(callee) == 1, entries
    assert callee[0].get("parent_id") == caller[0]["id"], entries
