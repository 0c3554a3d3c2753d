# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""DLPack interop and the interop examples through a real tritonserver:
models computing in PyTorch and JAX on their inputs (zero-copy checked in
the model, results checked here), BF16 and non-contiguous outputs, and the
clients of the pytorch, jax, bls_async, bls_decoupled, preprocessing
(ensemble) and render (outputs written in place) examples run as they are;
the clients of the examples that run on the official backend as well,
against it."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator

import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository, run_example_client

MODELS = [
    "dlpack_torch",
    "dlpack_jax",
    "pytorch",
    "jax",
    "add_sub",
    "square",
    "bls_async",
    "bls_decoupled",
    "preprocessing",
    "iris_preprocess",
    "iris_classify",
    "render",
]


@pytest.fixture(scope="module")
def interop_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("interop")
    srv = TritonServer(build_repository(work / "repo", MODELS), work)
    try:
        srv.wait_ready(timeout=180)
        yield srv
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]


def infer(srv: TritonServer, model: str, inputs: dict[str, tuple[np.ndarray, str]]):
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        ins = []
        for name, (arr, dtype) in inputs.items():
            t = httpclient.InferInput(name, list(arr.shape), dtype)
            t.set_data_from_numpy(arr, binary_data=True)
            ins.append(t)
        return c.infer(model, ins)
    finally:
        c.close()


# ------------------------------------------------------------------ torch in a model


@pytest.mark.parametrize("shape", [(2, 3), (300, 200)], ids=["inline", "arena"])
def test_torch_model_computes_on_shared_inputs(interop_server: TritonServer, shape) -> None:
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    res = infer(interop_server, "dlpack_torch", {"X": (x, "FP32")})
    np.testing.assert_allclose(res.as_numpy("Y"), (x * 2 + 1).T, rtol=1e-6)
    np.testing.assert_array_equal(res.as_numpy("XT"), x.T)
    # In the model: torch.from_dlpack(input) was a view of the request's
    # memory, and the output tensor held torch's result without a copy.
    assert res.as_numpy("SHARED").tolist() == [True, True]


def test_torch_model_bf16_through_dlpack(interop_server: TritonServer) -> None:
    b = np.array([1.0, -2.5, 0.15625, 1.0e38, 0.0], ml_dtypes.bfloat16)
    res = infer(
        interop_server,
        "dlpack_torch",
        {"X": (np.ones((1, 1), np.float32), "FP32"), "B": (b, "BF16")},
    )
    out = res.as_numpy("B2")
    assert out.dtype == ml_dtypes.bfloat16
    assert out.astype(np.float32).tolist() == (b.astype(np.float32) * 2).tolist()


# ------------------------------------------------------------------ jax in a model


def test_jax_model_borrows_arena_inputs(interop_server: TritonServer) -> None:
    x = np.linspace(-3, 3, 50_000, dtype=np.float32)  # 200 KB: in a shared-memory arena
    res = infer(interop_server, "dlpack_jax", {"X": (x, "FP32")})
    np.testing.assert_allclose(res.as_numpy("Y"), x * x + 1, rtol=1e-6)
    assert res.as_numpy("SHARED").tolist() == [True, True]


def test_jax_model_small_inputs_and_bf16(interop_server: TritonServer) -> None:
    x = np.array([0.5, -2.0, 3.0], np.float32)
    b = np.array([1.0, 255.0, -8.0], ml_dtypes.bfloat16)
    res = infer(interop_server, "dlpack_jax", {"X": (x, "FP32"), "B": (b, "BF16")})
    np.testing.assert_allclose(res.as_numpy("Y"), x * x + 1)
    # Inline inputs may be copied by XLA (alignment); outputs never are.
    assert res.as_numpy("SHARED").tolist()[1] is True
    assert res.as_numpy("B1").astype(np.float32).tolist() == [2.0, 256.0, -7.0]


# ------------------------------------------------------------------ example clients


@pytest.mark.parametrize(
    "example,flag,count",
    [
        ("pytorch", "--http", 4),
        ("jax", "--grpc", 4),
        ("bls_async", "--http", 1),
        ("bls_decoupled", "--grpc", 3),
        ("preprocessing", "--http", 6),
        ("render", "--http", 4),
        ("render", "--grpc", 4),
    ],
)
def test_example_client(interop_server: TritonServer, example: str, flag: str, count: int) -> None:
    url = interop_server.http_url if flag == "--http" else interop_server.grpc_url
    run_example_client(example, flag, url, oks=count, timeout=180)


# The examples whose clients also pass against the official Python backend
# (Triton 2.51's, as the benchmarks run it; the official_examples fixture of
# conftest.py), models unchanged but for `backend: "python"`: (example,
# client arguments, " ok" lines). The others: async_sleep (await
# request.wait_cancelled() is tritonpy's), bls_decoupled (async BLS in a
# decoupled model), mock_llm (response parameters, which that backend
# lacks), pytorch and jax (the official stub's Python has no torch or jax
# here), repeat (no client). docs/migration.md lists them.
OFFICIAL_RUNS = [
    ("add_sub", ["--http", "{http}", "--grpc", "{grpc}"], 2),
    ("square", ["--grpc", "{grpc}", "3", "0", "5"], 3),
    ("auto_complete", ["--http", "{http}"], 4),
    ("bls", ["--http", "{http}"], 3),
    ("bls_async", ["--http", "{http}"], 1),
    ("custom_metrics", ["--http", "{http}", "--metrics", "{metrics}"], 0),
    ("instance_kind", ["--http", "{http}"], 4),
    ("preprocessing", ["--http", "{http}"], 6),
    ("render", ["--http", "{http}"], 4),
    ("render", ["--grpc", "{grpc}"], 4),
]


@pytest.mark.parametrize(
    "example,args,oks",
    OFFICIAL_RUNS,
    ids=[f"{e}-{a[0].lstrip('-')}" for e, a, _ in OFFICIAL_RUNS],
)
def test_example_also_runs_on_the_official_backend(
    official_examples: TritonServer, example: str, args: list[str], oks: int
) -> None:
    srv = official_examples
    urls = {"http": srv.http_url, "grpc": srv.grpc_url, "metrics": f"localhost:{srv.metrics_port}"}
    out = run_example_client(example, *(a.format(**urls) for a in args), oks=oks)
    if example == "custom_metrics":
        assert 'custom_metrics_requests_total{model="custom_metrics"} 5' in out, out


def test_ensemble_bad_row_is_an_error_naming_it(interop_server: TritonServer) -> None:
    rows = np.array([b"5.1,3.5,1.4,0.2", b"tall, purple"], dtype=object)
    with pytest.raises(InferenceServerException) as e:
        infer(interop_server, "preprocessing", {"ROWS": (rows, "BYTES")})
    assert "iris_preprocess" in str(e.value) and "row 1" in str(e.value)
    # The pipeline still serves.
    res = infer(interop_server, "preprocessing", {"ROWS": (rows[:1], "BYTES")})
    assert res.as_numpy("LABEL").tolist() == [b"setosa"]


def add_sub_calls(srv: TritonServer) -> int:
    c = httpclient.InferenceServerClient(srv.http_url)
    try:
        stats = c.get_inference_statistics("add_sub")["model_stats"][0]
    finally:
        c.close()
    return int(stats["inference_count"])


def test_bls_decoupled_cancel_ends_the_inner_stream(interop_server: TritonServer) -> None:
    """A cancelled bls_decoupled stream stops calling add_sub, and the
    instance keeps serving: the next stream runs to its end."""
    results: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(interop_server.grpc_url)
    c.start_stream(callback=lambda result, error: results.put((result, error)))
    try:

        def ask(n: int, rid: str) -> None:
            inputs = [
                grpcclient.InferInput("X", [4], "FP32"),
                grpcclient.InferInput("STEPS", [1], "INT32"),
            ]
            inputs[0].set_data_from_numpy(np.ones(4, np.float32))
            inputs[1].set_data_from_numpy(np.array([n], np.int32))
            c.async_stream_infer("bls_decoupled", inputs, request_id=rid)

        ask(20_000, "long")
        result, error = results.get(timeout=60)
        assert error is None and result.as_numpy("STEP").tolist() == [1]
    finally:
        c.stop_stream(cancel_requests=True)
    # The calls stop (a loaded machine may take a moment), long before the
    # 20,000 steps a stream that went on would make.
    counts = [add_sub_calls(interop_server)]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (len(counts) < 3 or counts[-1] != counts[-3]):
        time.sleep(0.5)
        counts.append(add_sub_calls(interop_server))
    assert counts[-1] == counts[-3] and counts[-1] < 10_000, counts
    c.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        while not results.empty():
            results.get_nowait()
        ask(3, "short")
        steps = []
        while len(steps) < 3:
            result, error = results.get(timeout=60)
            assert error is None, error
            if result.get_response().id == "short":
                steps.append(result.as_numpy("STEP")[0])
        assert steps == [1, 2, 3]
    finally:
        c.stop_stream()
        c.close()
