# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The paths vllm_backend's model.py takes through the model API, end to
end on a real tritonserver (models/vllm_paths): auto_complete_config as a
classmethod, pb_utils.MetricFamily with metrics on and with
--allow-metrics=false, and request.timeout() inside execute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from server import TritonServer, build_repository, running, scrape

TIMEOUT_US = 2_500_000


def ask(srv: TritonServer, timeout_us: int | None) -> tuple[int, int]:
    """(TIMEOUT_US, METRICS) of one request sent with ``timeout_us``."""
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=60)
    try:
        x = httpclient.InferInput("X", [1], "INT32")
        x.set_data_from_numpy(np.array([1], np.int32))
        result = c.infer("vllm_paths", [x], timeout=timeout_us)
        return int(result.as_numpy("TIMEOUT_US")[0]), int(result.as_numpy("METRICS")[0])
    finally:
        c.close()


@pytest.mark.parametrize("metrics", ["on", "off"])
def test_vllm_paths(tmp_path: Path, metrics: str) -> None:
    args = [] if metrics == "on" else ["--allow-metrics=false"]
    srv = TritonServer(build_repository(tmp_path / "repo", ["vllm_paths"]), tmp_path, args=args)
    with running(srv):
        # The classmethod completed the config Triton serves.
        c = httpclient.InferenceServerClient(srv.http_url)
        try:
            config = c.get_model_config("vllm_paths")
        finally:
            c.close()
        assert [i["name"] for i in config["input"]] == ["X"], config
        assert sorted(o["name"] for o in config["output"]) == ["METRICS", "TIMEOUT_US"], config
        # request.timeout() is the client's, in microseconds; 0 when unset.
        assert ask(srv, TIMEOUT_US)[0] == TIMEOUT_US
        assert ask(srv, None)[0] == 0
        # The metric family was made (the official backend makes it with
        # metrics off too: Triton refuses custom metrics only in a build
        # without metrics, with "metrics not supported"), and it counts.
        assert ask(srv, None)[1] == 1, srv.log()[-3000:]
        if metrics == "on":
            assert 'vllm_paths_requests{model="vllm_paths"} 3' in scrape(srv)
    assert "vllm_paths: metrics not supported" not in srv.log()
