# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A client's system shared memory (Triton's shared-memory extension) is
client input like any other (docs/hardening.md, "Hostile clients"): a
region too small for an output, an input region of another size than the
input's, BYTES data in a region with a forged length prefix each fail
their own request, no stub dies, and the model answers its next request;
a stream writes each response's outputs into the region it was given."""

from __future__ import annotations

import os
import queue
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from hostile_requests import StubWatch
from hostile_senders import probe
from server import TritonServer, build_repository, running

MODELS = ["add_sub", "repeat", "iris_preprocess"]
REGION = 64  # bytes of each region


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("hostile_shm")
    with running(TritonServer(build_repository(work / "repo", MODELS), work)) as s:
        yield s


@pytest.fixture
def region(srv: TritonServer) -> Iterator[tuple[str, Any]]:
    """A system shared-memory region of REGION bytes, registered with the
    server under a name of this process's own."""
    name = f"tritonpy_test_{os.getpid()}_{os.urandom(4).hex()}"
    handle = shm.create_shared_memory_region(name, f"/{name}", REGION)
    client = httpclient.InferenceServerClient(srv.http_url)
    client.register_system_shared_memory(name, f"/{name}", REGION)
    try:
        yield name, handle
    finally:
        client.unregister_system_shared_memory(name)
        client.close()
        shm.destroy_shared_memory_region(handle)


@pytest.fixture
def watch(srv: TritonServer) -> Iterator[StubWatch]:
    """The stubs of ``srv``: after the test every model still answers its
    well-formed request and no stub died."""
    w = StubWatch(srv)
    yield w
    for model in MODELS:
        a = probe(srv, model)
        assert a.ok, f"{model} no longer answers: {a}"
    assert w.deaths() == []


def client(srv: TritonServer, protocol: str) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(srv.http_url)
    return grpcclient.InferenceServerClient(srv.grpc_url)


def add_sub_inputs(mod: Any) -> list[Any]:
    a = np.arange(4, dtype=np.float32)
    inputs = [mod.InferInput("INPUT0", [4], "FP32"), mod.InferInput("INPUT1", [4], "FP32")]
    for i in inputs:
        i.set_data_from_numpy(a)
    return inputs


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_output_region_too_small_fails_its_request_alone(
    srv: TritonServer, region: tuple[str, Any], watch: StubWatch, protocol: str
) -> None:
    name, handle = region
    mod = httpclient if protocol == "http" else grpcclient
    c = client(srv, protocol)
    out = mod.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory(name, 8)  # FP32 [4] needs 16
    with pytest.raises(InferenceServerException) as e:
        c.infer("add_sub", add_sub_inputs(mod), outputs=[out])
    assert (
        "shared memory size specified with the request for output 'OUTPUT0' (8 bytes) "
        "should be at least 16 bytes to hold the results"
    ) in str(e.value)
    # The same region at an offset with room enough takes the output.
    out = mod.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory(name, 16, offset=REGION - 16)
    c.infer("add_sub", add_sub_inputs(mod), outputs=[out])
    got = shm.get_contents_as_numpy(handle, np.float32, [4], offset=REGION - 16)
    assert got.tolist() == [0.0, 2.0, 4.0, 6.0]
    c.close()


@pytest.mark.parametrize("size", [8, 32])
def test_an_input_region_of_another_size_is_refused(
    srv: TritonServer, region: tuple[str, Any], watch: StubWatch, size: int
) -> None:
    name, handle = region
    shm.set_shared_memory_region(handle, [np.arange(REGION // 4, dtype=np.float32)])
    c = client(srv, "http")
    inputs = add_sub_inputs(httpclient)
    inputs[0].set_shared_memory(name, size)
    with pytest.raises(InferenceServerException) as e:
        c.infer("add_sub", inputs)
    assert (
        f"input byte size mismatch for input 'INPUT0' for model 'add_sub'. Expected 16, got {size}"
        in str(e.value)
    )
    inputs[0].set_shared_memory(name, 16)
    assert c.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist() == [0.0, 2.0, 4.0, 6.0]
    c.close()


def test_bytes_with_a_forged_prefix_in_a_region_fail_their_request(
    srv: TritonServer, region: tuple[str, Any], watch: StubWatch
) -> None:
    name, handle = region
    forged = struct.pack("<I", 1000) + b"abcd"  # claims 1000 bytes, 4 follow
    shm.set_shared_memory_region(handle, [np.frombuffer(forged, dtype=np.uint8)])
    c = client(srv, "http")
    rows = httpclient.InferInput("ROWS", [1], "BYTES")
    rows.set_shared_memory(name, len(forged))
    with pytest.raises(InferenceServerException) as e:
        c.infer("iris_preprocess", [rows])
    text = str(e.value)
    assert "[400]" in text
    assert (
        "incomplete string data for inference input 'ROWS', expecting string of length "
        "1000 but only 4 bytes available (tritonpy: model 'iris_preprocess'"
    ) in text
    row = b"5.1,3.5,1.4,0.2"
    good = struct.pack("<I", len(row)) + row
    shm.set_shared_memory_region(handle, [np.frombuffer(good, dtype=np.uint8)])
    rows.set_shared_memory(name, len(good))
    assert c.infer("iris_preprocess", [rows]).as_numpy("FEATURES").shape == (1, 4)
    c.close()


def repeat_stream(
    srv: TritonServer, values: list[int], region: str, out_bytes: int
) -> tuple[Any, queue.Queue[Any]]:
    """A gRPC stream asking `repeat` for one response per value, each
    response's OUT written into ``out_bytes`` of ``region``; the stream's
    (result, error) pairs arrive in the queue."""
    got: queue.Queue[Any] = queue.Queue()
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    c.start_stream(callback=lambda result, error: got.put((result, error)))
    inp = grpcclient.InferInput("IN", [len(values)], "INT32")
    inp.set_data_from_numpy(np.array(values, np.int32))
    out = grpcclient.InferRequestedOutput("OUT")
    out.set_shared_memory(region, out_bytes)
    c.async_stream_infer(
        "repeat",
        [inp],
        outputs=[out, grpcclient.InferRequestedOutput("IDX")],
        enable_empty_final_response=True,
    )
    return c, got


def test_a_stream_writes_each_response_into_its_region(
    srv: TritonServer, region: tuple[str, Any], watch: StubWatch
) -> None:
    name, handle = region
    c, got = repeat_stream(srv, [7, 8, 9], name, 4)
    indices = []
    while True:
        result, error = got.get(timeout=60)
        assert error is None, error
        params = result.get_response().parameters
        if params["triton_final_response"].bool_param:
            break
        indices.append(int(result.as_numpy("IDX")[0]))
    c.stop_stream()
    c.close()
    assert indices == [0, 1, 2]
    # The region holds the last response's OUT.
    assert shm.get_contents_as_numpy(handle, np.int32, [1]).tolist() == [9]


def test_a_stream_whose_output_region_is_too_small_still_ends(
    srv: TritonServer, region: tuple[str, Any], watch: StubWatch
) -> None:
    # Every response of the stream fails (its OUT needs 4 bytes, the region
    # offers 2), and the stream still ends with its final response.
    name, _ = region
    c, got = repeat_stream(srv, [4, 5, 6], name, 2)
    try:
        errors: list[str] = []
        while True:
            try:
                result, error = got.get(timeout=60)
            except queue.Empty:
                pytest.fail(f"the stream never ended; it sent {len(errors)} errors")
            if error is not None:
                errors.append(str(error))
                continue
            params = result.get_response().parameters
            assert "triton_final_response" in params, f"a response without its flag: {params}"
            if params["triton_final_response"].bool_param:
                break
        assert len(errors) == 3, errors
        assert all("should be at least 4 bytes to hold the results" in e for e in errors), errors
    finally:
        # Cancelled: a stream that did not end must not hang the test.
        c.stop_stream(cancel_requests=True)
        c.close()
