# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Models served by a real tritonserver through tritonpy, asked by real
tritonclient HTTP and gRPC clients."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository, run_example_client

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ["http", "grpc"]


@contextlib.contextmanager
def client(server: TritonServer, proto: str) -> Iterator[tuple[Any, Any]]:
    """A client that is closed afterwards: tritonserver waits for open HTTP
    connections before it exits."""
    if proto == "http":
        mod, c = httpclient, httpclient.InferenceServerClient(server.http_url)
    else:
        mod, c = grpcclient, grpcclient.InferenceServerClient(server.grpc_url)
    try:
        yield mod, c
    finally:
        c.close()


def infer(
    server: TritonServer,
    proto: str,
    model: str,
    arrays: dict[str, tuple[np.ndarray, str]],
    outputs: list[str] | None = None,
    request_id: str = "",
):
    with client(server, proto) as (mod, c):
        inputs = []
        for name, (arr, dtype) in arrays.items():
            i = mod.InferInput(name, list(arr.shape), dtype)
            i.set_data_from_numpy(arr)
            inputs.append(i)
        outs = [mod.InferRequestedOutput(n) for n in outputs] if outputs else None
        return c.infer(model, inputs, outputs=outs, request_id=request_id)


@pytest.mark.parametrize("proto", PROTOCOLS)
@pytest.mark.parametrize("model", ["add_sub", "add_sub_python"])
def test_add_sub_under_both_backend_names(server: TritonServer, proto: str, model: str) -> None:
    x = np.array([1, 2, 3, 4], np.float32)
    y = np.array([0.5, 0.25, -1, 10], np.float32)
    res = infer(server, proto, model, {"INPUT0": (x, "FP32"), "INPUT1": (y, "FP32")})
    np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), x + y)
    np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), x - y)


def test_model_metadata_names_the_backend(server: TritonServer) -> None:
    with client(server, "http") as (_, c):
        assert c.get_model_config("add_sub")["backend"] == "tritonpy"
        assert c.get_model_config("add_sub_python")["backend"] == "python"


FIXED = {
    "BOOL": np.array([True, False, True]),
    "UINT8": np.array([0, 1, 255], np.uint8),
    "UINT16": np.array([0, 65535, 7], np.uint16),
    "UINT32": np.array([0, 2**32 - 1, 7], np.uint32),
    "UINT64": np.array([0, 2**64 - 1, 7], np.uint64),
    "INT8": np.array([-128, 0, 127], np.int8),
    "INT16": np.array([-32768, 0, 32767], np.int16),
    "INT32": np.array([-(2**31), 0, 2**31 - 1], np.int32),
    "INT64": np.array([-(2**63), 0, 2**63 - 1], np.int64),
    "FP16": np.array([0.5, -1.25, 65504], np.float16),
    "FP32": np.array([0.5, -1.25, 3.4e38], np.float32),
    "FP64": np.array([0.5, -1.25, 1e300], np.float64),
}


@pytest.mark.parametrize("proto", PROTOCOLS)
@pytest.mark.parametrize("dtype", sorted(FIXED))
def test_identity_every_fixed_type(server: TritonServer, proto: str, dtype: str) -> None:
    arr = FIXED[dtype]
    res = infer(server, proto, "identity", {f"IN_{dtype}": (arr, dtype)}, [f"OUT_{dtype}"])
    out = res.as_numpy(f"OUT_{dtype}")
    assert out.dtype == arr.dtype
    np.testing.assert_array_equal(out, arr)


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_identity_strings(server: TritonServer, proto: str) -> None:
    arr = np.array([b"hello", b"", "na\u00efve".encode(), b"\x00\xff bytes"], dtype=object)
    res = infer(server, proto, "identity", {"IN_STRING": (arr, "BYTES")}, ["OUT_STRING"])
    assert res.as_numpy("OUT_STRING").tolist() == arr.tolist()


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_identity_bf16_through_dlpack(server: TritonServer, proto: str) -> None:
    arr = np.array([1.0, -2.5, 0.15625, 3.0e38], ml_dtypes.bfloat16)
    res = infer(server, proto, "identity", {"IN_BF16": (arr, "BF16")}, ["OUT_BF16"])
    out = res.as_numpy("OUT_BF16")
    assert out.tobytes() == arr.tobytes()


@pytest.mark.parametrize("proto", PROTOCOLS)
@pytest.mark.parametrize("dtype", ["FP32", "BYTES"])
def test_identity_zero_size(server: TritonServer, proto: str, dtype: str) -> None:
    arr = np.zeros(0, np.float32) if dtype == "FP32" else np.array([], dtype=object)
    name = "FP32" if dtype == "FP32" else "STRING"
    res = infer(server, proto, "identity", {f"IN_{name}": (arr, dtype)}, [f"OUT_{name}"])
    assert res.as_numpy(f"OUT_{name}").shape == (0,)


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_large_tensor_round_trip(server: TritonServer, proto: str) -> None:
    arr = np.random.default_rng(1).random(3 << 20, dtype=np.float32)  # 12 MiB
    res = infer(server, proto, "identity", {"IN_FP32": (arr, "FP32")}, ["OUT_FP32"])
    np.testing.assert_array_equal(res.as_numpy("OUT_FP32"), arr)


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_non_contiguous_and_empty_outputs(server: TritonServer, proto: str) -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    res = infer(server, proto, "shapes", {"X": (x, "FP32")})
    np.testing.assert_array_equal(res.as_numpy("TRANSPOSED"), x.T)
    np.testing.assert_array_equal(res.as_numpy("EVERY_OTHER_ROW"), x[::2])
    assert res.as_numpy("EMPTY").shape == (0, 3)
    np.testing.assert_array_equal(res.as_numpy("BIG"), np.arange(1 << 20, dtype=np.float32) + 66)
    assert (res.as_numpy("FILLED") == 66).all()


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_outputs_written_in_place_under_concurrency(server: TritonServer, proto: str) -> None:
    """pb_utils.Tensor.empty outputs are sent from shared memory without a
    copy: with many requests in flight, each answer still holds its own
    values (a block reused before the backend read it would mix them)."""

    def one(i: int) -> bool:
        x = np.full((2, 2), i, np.float32)
        res = infer(server, proto, "shapes", {"X": (x, "FP32")}, ["FILLED"])
        return bool((res.as_numpy("FILLED") == 4 * i).all())

    with cf.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(one, range(48)))


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_multifile_model(server: TritonServer, proto: str) -> None:
    x = np.array([1, 2, 3], np.int64)
    res = infer(server, proto, "multifile", {"X": (x, "INT64")})
    np.testing.assert_array_equal(res.as_numpy("Y"), x * 3)


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_default_model_filename(server: TritonServer, proto: str) -> None:
    x = np.array([1, 2], np.int64)
    res = infer(server, proto, "custom_filename", {"X": (x, "INT64")})
    np.testing.assert_array_equal(res.as_numpy("Y"), x + 100)


def test_dynamic_batching_under_concurrent_load(server: TritonServer) -> None:
    """64 concurrent clients against 2 instances with a dynamic batcher: each
    client gets its own answer, batches really form, both instances serve."""

    def one(i: int) -> tuple[int, int, int]:
        with client(server, "http") as (_, c):
            inp = httpclient.InferInput("IN", [1, 1], "INT32")
            inp.set_data_from_numpy(np.array([[i]], np.int32))
            res = c.infer("batched", [inp])
        return (
            int(res.as_numpy("OUT")[0, 0]),
            int(res.as_numpy("BATCH")[0, 0]),
            int(res.as_numpy("PID")[0, 0]),
        )

    with cf.ThreadPoolExecutor(64) as pool:
        results = list(pool.map(one, range(512)))
    assert [r[0] for r in results] == [2 * i for i in range(512)]
    assert max(r[1] for r in results) > 1, "no batch ever held more than one request"
    assert len({r[2] for r in results}) == 2, "both instances should have served"


def test_batched_request_with_several_rows(server: TritonServer) -> None:
    inp = grpcclient.InferInput("IN", [5, 1], "INT32")
    inp.set_data_from_numpy(np.arange(5, dtype=np.int32).reshape(5, 1))
    with client(server, "grpc") as (_, c):
        res = c.infer("batched", [inp])
    np.testing.assert_array_equal(res.as_numpy("OUT").ravel(), np.arange(5) * 2)


def mode(server: TritonServer, proto: str, m: str, request_id: str = ""):
    return infer(
        server,
        proto,
        "errors",
        {"MODE": (np.array([m.encode()], dtype=object), "BYTES")},
        request_id=request_id,
    )


@pytest.mark.parametrize("proto", PROTOCOLS)
@pytest.mark.parametrize(
    "m,needle",
    [
        ("raise", "RuntimeError: the model raised on purpose\n"),
        (
            "count",
            "Number of InferenceResponse objects do not match the number of InferenceRequest "
            "objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0",
        ),
        (
            "type",
            "Expected an 'InferenceResponse' object in the execute function return list, "
            "found type '<class 'str'>'.",
        ),
    ],
)
def test_batch_errors_reach_the_client_and_the_model_serves_on(
    server: TritonServer, proto: str, m: str, needle: str
) -> None:
    """With the official backend's words first (the instance is 'errors_0':
    the model's config names no instance group)."""
    with pytest.raises(InferenceServerException) as e:
        mode(server, proto, m)
    official = "Failed to process the request(s) for model 'errors_0', message: " + needle
    assert e.value.message().startswith(official), e.value.message()
    assert mode(server, proto, "ok").as_numpy("OUT").tolist() == [7]


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_error_response_keeps_code_and_message(server: TritonServer, proto: str) -> None:
    with pytest.raises(InferenceServerException) as e:
        mode(server, proto, "error")
    assert "refused on purpose" in str(e.value)
    status = str(e.value.status())
    assert status in ("400", "StatusCode.INVALID_ARGUMENT"), status


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_bad_output_names_model_request_and_output(server: TritonServer, proto: str) -> None:
    with pytest.raises(InferenceServerException) as e:
        mode(server, proto, "bad_output")
    msg = str(e.value)
    assert "errors" in msg and "'OUT'" in msg
    assert mode(server, proto, "ok").as_numpy("OUT").tolist() == [7]


@pytest.mark.parametrize("proto", PROTOCOLS)
@pytest.mark.parametrize(
    "m,needle",
    [
        ("list_str", "the list mixes strings with int (1)"),
        ("obj_int", "cannot serialize as BYTES: element 0 has type int"),
        ("huge", "is 1099511627776 bytes, more than this machine's memory"),
    ],
)
def test_wrong_outputs_name_model_request_and_output(
    server: TritonServer, proto: str, m: str, needle: str
) -> None:
    """A model returning what cannot be a tensor gets an error naming the
    model, the request and the output; the model serves on."""
    with pytest.raises(InferenceServerException) as e:
        mode(server, proto, m, request_id=f"wrong-{m}")
    msg = str(e.value)
    assert needle in msg and "'errors'" in msg and f"'wrong-{m}'" in msg and "'OUT'" in msg, msg
    assert mode(server, proto, "ok").as_numpy("OUT").tolist() == [7]


@pytest.mark.parametrize("proto", PROTOCOLS)
@pytest.mark.parametrize(
    "m,value,shape",
    [
        ("noncontig", list(range(0, 16, 2)), [8]),  # copied into one contiguous run
        ("zero_d", 7, []),  # a 0-d array is a tensor of shape []
        ("np_scalar", 7, []),  # so is a numpy scalar, as np.asarray makes it
    ],
)
def test_outputs_numpy_can_make_contiguous_are_accepted(
    server: TritonServer, proto: str, m: str, value: object, shape: list[int]
) -> None:
    out = mode(server, proto, m).as_numpy("OUT")
    assert out.tolist() == value and list(out.shape) == shape and out.dtype == np.int32


@pytest.mark.parametrize("proto", PROTOCOLS)
@pytest.mark.parametrize(
    "dtype,shape,needle",
    [
        ("INT32", [4], "data-type"),
        ("FP32", [5], "shape"),
    ],
)
def test_wrong_client_inputs_get_triton_errors(
    server: TritonServer, proto: str, dtype: str, shape: list[int], needle: str
) -> None:
    """Inputs that do not match the model config are refused by Triton
    before the backend sees them; the model serves on."""
    arr = np.ones(shape, np.int32 if dtype == "INT32" else np.float32)
    with pytest.raises(InferenceServerException) as e:
        infer(server, proto, "add_sub", {"INPUT0": (arr, dtype), "INPUT1": (arr, dtype)})
    assert needle in str(e.value) and "add_sub" in str(e.value), str(e.value)
    ok = np.ones(4, np.float32)
    res = infer(server, proto, "add_sub", {"INPUT0": (ok, "FP32"), "INPUT1": (ok, "FP32")})
    assert res.as_numpy("OUTPUT0").tolist() == [2, 2, 2, 2]


def test_failed_initialize_leaves_model_unavailable_with_the_reason(server: TritonServer) -> None:
    with client(server, "http") as (_, c):
        with pytest.raises(InferenceServerException) as e:
            c.load_model("init_fail")
        assert "weights.bin is missing on purpose" in str(e.value)
        assert not server.model_ready("init_fail")
        index = {m["name"]: m for m in c.get_model_repository_index()}
    assert index["init_fail"]["state"] == "UNAVAILABLE"
    assert "weights.bin is missing on purpose" in index["init_fail"]["reason"]
    # Other models are untouched.
    assert server.model_ready("add_sub")


def test_example_client(server: TritonServer) -> None:
    run_example_client("add_sub", "--http", server.http_url, "--grpc", server.grpc_url, oks=2)


def test_unknown_input_gets_tritons_error(server: TritonServer) -> None:
    with pytest.raises(InferenceServerException) as e:
        infer(server, "http", "multifile", {"NOPE": (np.array([1], np.int64), "INT64")})
    assert "NOPE" in str(e.value)


def test_two_servers_with_the_official_shm_settings(tmp_path: Path) -> None:
    """Command lines written for the official backend keep working: its
    shared-memory settings are accepted (and ignored), and two servers on
    one host given the same region prefix serve side by side, with nothing
    named in /dev/shm."""
    official = [
        f"--backend-config={name},{key}={value}"
        for name in ("tritonpy", "python")
        for key, value in (
            ("shm-region-prefix-name", "same_prefix"),
            ("shm-default-byte-size", "1048576"),
            ("shm-growth-byte-size", "1048576"),
            ("shm_message_queue_size", "64"),
            ("thread-pool-size", "4"),
        )
    ]
    servers = []
    try:
        for i in range(2):
            work = tmp_path / f"s{i}"
            servers.append(
                TritonServer(build_repository(work / "repo", ["add_sub"]), work, args=official)
            )
        for srv in servers:
            srv.wait_ready()
        x = np.arange(4, dtype=np.float32)
        for _ in range(20):
            for srv in servers:
                res = infer(srv, "http", "add_sub", {"INPUT0": (x, "FP32"), "INPUT1": (x, "FP32")})
                np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), x + x)
        assert not [n for n in os.listdir("/dev/shm") if "same_prefix" in n or "tritonpy" in n]
        log = servers[0].log()
        # Each official key, as the official backend spells it, gets the
        # "accepted and ignored" line, never the unknown-key warning.
        for key in ("shm-region-prefix-name", "shm_message_queue_size", "thread-pool-size"):
            assert f"tritonpy: {key} (" in log and "accepted for compatibility" in log, key
        assert "unknown backend setting" not in log
    finally:
        for srv in servers:
            assert srv.stop() == 0
