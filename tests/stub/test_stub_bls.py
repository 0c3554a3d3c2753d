# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""BLS and the model loading API in the real stub, with the test host
playing the backend (and Triton) over the real protocol."""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import struct
from pathlib import Path

import numpy as np
import pytest

import protocol_ref as P
from host import StubHost, f32

FP32 = 11

CALLER = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "A")
            bls = pb_utils.InferenceRequest(
                model_name="target", inputs=[x], requested_output_names=["Y"],
                correlation_id="seq-1", flags=pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
                timeout=0, parameters={"k": 1})
            resp = bls.exec()
            if resp.has_error():
                out.append(pb_utils.InferenceResponse(error=resp.error()))
                continue
            y = pb_utils.get_output_tensor_by_name(resp, "Y").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", y * 2)]))
        return out
"""


def bls_reply(
    host: StubHost,
    call_id: int,
    outputs: list[dict],
    *,
    final: bool = True,
    error: tuple[int, str] | None = None,
    params: str = "",
) -> None:
    host.send(
        P.encode(
            P.BLS_RESPONSE,
            {
                "response_flags": 1 if final else 0,
                "has_error": int(error is not None),
                "error_code": error[0] if error else 0,
                "error_message": error[1] if error else "",
                "parameters": params,
                "outputs": outputs,
            },
            id=call_id,
        )
    )


def bls_arena(host: StubHost, arena_id: int, size: int) -> mmap.mmap:
    fd = os.memfd_create(f"bls-{arena_id}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    m = mmap.mmap(fd, size)
    host.send(P.encode(P.BLS_ARENA, {"arena_id": arena_id, "size": size}), (fd,))
    os.close(fd)
    return m


def test_sync_exec_from_sync_execute(host: StubHost, tmp_path: Path) -> None:
    assert host.load(tmp_path, CALLER)["ok"] is True
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [f32("A", [1, 2])])]}, id=1))
    req = host.recv_type("BLS_REQUEST")
    body = req["body"]
    assert body["model_name"] == "target" and body["model_version"] == -1
    q = body["request"]
    assert q["correlation_kind"] == 2 and q["correlation_str"] == "seq-1" and q["flags"] == 1
    assert q["requested_outputs"] == ["Y"] and json.loads(q["parameters"]) == {"k": 1}
    assert np.frombuffer(bytes.fromhex(q["inputs"][0]["data_hex"]), np.float32).tolist() == [1, 2]
    bls_reply(host, req["id"], [f32("Y", [10, 20])])
    reply = host.recv_type("RESPONSES")
    out = reply["body"]["responses"][0]["outputs"][0]
    assert np.frombuffer(host.tensor_bytes(out), np.float32).tolist() == [20, 40]


def test_error_response_reaches_the_model(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, CALLER)
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [f32("A", [1])])]}, id=1))
    req = host.recv_type("BLS_REQUEST")
    bls_reply(host, req["id"], [], error=(2, "unknown model 'target'"))
    resp = host.recv_type("RESPONSES")["body"]["responses"][0]
    assert (
        resp["has_error"] and resp["error_code"] == 2 and "unknown model" in resp["error_message"]
    )


def test_output_bytes_disagreeing_with_its_shape_fail_that_call(
    host: StubHost, tmp_path: Path
) -> None:
    """A BLS response whose tensor carries the wrong byte count is an error
    response naming the tensor, for that call only; its arena outputs go
    back to the backend; the stub goes on."""
    host.load(tmp_path, CALLER)
    bls_arena(host, 1, 1 << 16)
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [f32("A", [1])])]}, id=1))
    req = host.recv_type("BLS_REQUEST")
    bad = P.inline("Y", FP32, [3], struct.pack("<2f", 1, 2))  # 8 bytes for 3 floats
    in_arena = P.Tensor("Z", FP32, [4], 16, 1, b"", 1, 256).to_json()
    bls_reply(host, req["id"], [in_arena, bad])
    released, resp = None, None
    while released is None or resp is None:
        f = host.recv()
        if f["type"] == "BLS_RELEASE":
            released = f["body"]["allocations"]
        elif f["type"] == "RESPONSES":
            resp = f["body"]["responses"][0]
    assert released == [{"arena_id": 1, "offset": 256}]
    assert resp["has_error"], resp
    assert (
        "Tensor 'Y'" in resp["error_message"] and "needs 12 bytes, got 8" in resp["error_message"]
    ), resp
    # the next request is served normally
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r2", [f32("A", [3])])]}, id=2))
    req = host.recv_type("BLS_REQUEST")
    bls_reply(host, req["id"], [f32("Y", [5])])
    out = host.recv_type("RESPONSES")["body"]["responses"][0]["outputs"][0]
    assert np.frombuffer(host.tensor_bytes(out), np.float32).tolist() == [10]


ZERO_COPY = """
import gc
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        r = requests[0]
        resp = pb_utils.InferenceRequest(model_name="t", inputs=[], requested_output_names=[]).exec()
        y = pb_utils.get_output_tensor_by_name(resp, "BIG").as_numpy()
        total = float(y.sum())
        del y, resp
        gc.collect()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("S", np.array([total], np.float32))])]
"""


def test_arena_outputs_are_read_in_place_and_released(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, ZERO_COPY)
    m = bls_arena(host, 1, 1 << 20)
    data = np.arange(1024, dtype=np.float32)
    m[4096 : 4096 + data.nbytes] = data.tobytes()
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=1))
    req = host.recv_type("BLS_REQUEST")
    bls_reply(
        host, req["id"], [P.Tensor("BIG", FP32, [1024], data.nbytes, 1, b"", 1, 4096).to_json()]
    )
    seen = set()
    while True:
        f = host.recv()
        seen.add(f["type"])
        if f["type"] == "BLS_RELEASE":
            assert f["body"]["allocations"] == [{"arena_id": 1, "offset": 4096}]
        if f["type"] == "RESPONSES":
            out = f["body"]["responses"][0]["outputs"][0]
            assert np.frombuffer(host.tensor_bytes(out), np.float32)[0] == float(data.sum())
        if {"BLS_RELEASE", "RESPONSES"} <= seen:
            break
    m.close()


DECOUPLED = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        it = pb_utils.InferenceRequest(model_name="square", inputs=[],
                                       requested_output_names=["OUT"]).exec(decoupled=True)
        vals = [int(pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()[0])
                for r in it if r.output_tensors()]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("N", np.array(vals, np.int32))])]
"""


def test_decoupled_exec_streams_until_final(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, DECOUPLED)
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=1))
    req = host.recv_type("BLS_REQUEST")
    for i in range(3):
        bls_reply(host, req["id"], [P.inline("OUT", 8, [1], struct.pack("<i", i))], final=False)
    bls_reply(host, req["id"], [], final=True)  # flags-only end of stream
    out = host.recv_type("RESPONSES")["body"]["responses"][0]["outputs"][0]
    assert np.frombuffer(host.tensor_bytes(out), np.int32).tolist() == [0, 1, 2]


REITERATE = """
import numpy as np
import triton_python_backend_utils as pb_utils

def n(r):
    return int(pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()[0]) if r.output_tensors() else -1

class TritonPythonModel:
    def execute(self, requests):
        it = pb_utils.InferenceRequest(model_name="square", inputs=[],
                                       requested_output_names=["OUT"]).exec(decoupled=True)
        seen = [n(next(it))]
        seen += [n(r) for r in it]        # the rest, up to the final response
        try:
            next(it)
            ended = 0
        except StopIteration:
            ended = 1
        again = [n(r) for r in it]        # a new for loop: all of them again
        part = []
        for r in it:                      # a loop left early resumes where it was
            part.append(n(r))
            if len(part) == 2:
                break
        part += [n(r) for r in it]
        vals = seen + [ended] + again + part
        return [pb_utils.InferenceResponse([pb_utils.Tensor("N", np.array(vals, np.int32))])]
"""


def test_a_finished_response_iterator_iterates_again_from_its_first_response(
    host: StubHost, tmp_path: Path
) -> None:
    # As the official ResponseIterator: once the final response is in, a
    # new for loop over an exhausted iterator yields every response again,
    # and one over an iterator left mid-way resumes there.
    host.load(tmp_path, REITERATE)
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=1))
    req = host.recv_type("BLS_REQUEST")
    for i in range(3):
        bls_reply(host, req["id"], [P.inline("OUT", 8, [1], struct.pack("<i", i))], final=False)
    bls_reply(host, req["id"], [], final=True)
    out = host.recv_type("RESPONSES")["body"]["responses"][0]["outputs"][0]
    got = np.frombuffer(host.tensor_bytes(out), np.int32).tolist()
    stream = [0, 1, 2, -1]
    assert got == [*stream, 1, *stream, *stream]


ASYNC_MANY = """
import asyncio
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        before = threading.active_count()
        calls = [pb_utils.InferenceRequest(
                    model_name="t", inputs=[pb_utils.Tensor("I", np.array([i], np.int32))],
                    requested_output_names=["O"]).async_exec() for i in range(200)]
        got = await asyncio.gather(*calls)
        vals = [int(pb_utils.get_output_tensor_by_name(r, "O").as_numpy()[0]) for r in got]
        assert threading.active_count() == before
        return [pb_utils.InferenceResponse([pb_utils.Tensor("V", np.array(vals, np.int32))])]
"""


def test_200_async_exec_in_flight(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, ASYNC_MANY)
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=1))
    reqs = [host.recv_type("BLS_REQUEST") for _ in range(200)]
    for req in reversed(reqs):  # answered in any order
        i = struct.unpack("<i", bytes.fromhex(req["body"]["request"]["inputs"][0]["data_hex"]))[0]
        bls_reply(host, req["id"], [P.inline("O", 8, [1], struct.pack("<i", i * 3))])
    resp = host.recv_type("RESPONSES")["body"]["responses"][0]
    assert not resp["has_error"], resp
    assert np.frombuffer(host.tensor_bytes(resp["outputs"][0]), np.int32).tolist() == [
        3 * i for i in range(200)
    ]


SELF_CALL = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        resp = pb_utils.InferenceRequest(model_name="m", inputs=[],
                                         requested_output_names=[]).exec()
        return [pb_utils.InferenceResponse(error=resp.error())]
"""


def test_self_call_fails_instead_of_deadlocking(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, SELF_CALL, config={"name": "m"})
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=1))
    resp = host.recv_type("RESPONSES", timeout=30)["body"]["responses"][0]
    assert resp["has_error"] and "deadlock" in resp["error_message"]


TIMEOUT = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        resp = pb_utils.InferenceRequest(model_name="slow", inputs=[],
                                         requested_output_names=[], timeout=1000).exec()
        return [pb_utils.InferenceResponse(error=resp.error())]
"""


@pytest.mark.parametrize("spin_us", ["300", "600000000"], ids=["default_spin", "spin_of_10_min"])
def test_timeout_is_enforced_when_no_answer_comes(
    host: StubHost, tmp_path: Path, spin_us: str
) -> None:
    """Also when bls_spin_microseconds is far past the call's timeout: the
    blocking exec() stops spinning when the call times out, not when the
    spin's budget (ten minutes) is spent. The stub then serves on."""
    spin = {"bls_spin_microseconds": {"string_value": spin_us}}
    host.load(tmp_path, TIMEOUT, config={"name": "m", "parameters": spin})
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=1))
    req = host.recv_type("BLS_REQUEST")
    # The test never answers: only the stub's own timer can cancel it.
    cancel = host.recv_type("BLS_CANCEL", timeout=30)
    assert cancel["id"] == req["id"]
    resp = host.recv_type("RESPONSES", timeout=30)["body"]["responses"][0]
    assert resp["has_error"] and "BLS call timed out" in resp["error_message"]
    bls_reply(host, req["id"], [], error=(7, "cancelled"))  # late answer is dropped
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=2))
    bls_reply(host, host.recv_type("BLS_REQUEST")["id"], [])
    resp = host.recv_type("RESPONSES", timeout=30)["body"]["responses"][0]
    assert not resp["has_error"], resp


CONTROL = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        pb_utils.load_model("other", config='{"backend":"python"}', files={"file:1/model.py": b"x"})
        ready = pb_utils.is_model_ready("other", "1")
        try:
            pb_utils.unload_model("other", unload_dependents=True)
            err = ""
        except pb_utils.TritonModelException as e:
            err = str(e)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("R", np.array([ready], bool))],
                                           error=pb_utils.TritonError(err) if err else None)]
"""


def test_model_control_round_trips(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, CONTROL)
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=1))
    seen = []
    for reply in (
        {"ok": True, "error": "", "ready": False},
        {"ok": True, "error": "", "ready": True},
        {"ok": False, "error": "nope", "ready": False},
    ):
        f = host.recv_type("MODEL_CONTROL")
        seen.append(f["body"]["json"])
        host.send(P.encode(P.MODEL_CONTROL_DONE, {"json": reply}, id=f["id"]))
    assert seen[0]["op"] == "load" and seen[0]["files"] == {"file:1/model.py": "eA=="}
    assert seen[1] == {"op": "is_ready", "model_name": "other", "model_version": "1"}
    assert seen[2]["op"] == "unload" and seen[2]["unload_dependents"] is True
    resp = host.recv_type("RESPONSES")["body"]["responses"][0]
    assert resp["has_error"] and "nope" in resp["error_message"]


THREADS = """
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        results = [None] * 4
        def work(i):
            r = pb_utils.InferenceRequest(model_name="t", inputs=[pb_utils.Tensor(
                "I", np.array([i], np.int32))], requested_output_names=["O"]).exec()
            results[i] = int(pb_utils.get_output_tensor_by_name(r, "O").as_numpy()[0])
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()   # the loop thread is blocked here
        return [pb_utils.InferenceResponse([pb_utils.Tensor("V", np.array(results, np.int32))])]
"""


def test_exec_from_threads_while_execute_blocks(host: StubHost, tmp_path: Path) -> None:
    host.load(tmp_path, THREADS)
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=1))
    for _ in range(4):
        req = host.recv_type("BLS_REQUEST")
        i = struct.unpack("<i", bytes.fromhex(req["body"]["request"]["inputs"][0]["data_hex"]))[0]
        bls_reply(host, req["id"], [P.inline("O", 8, [1], struct.pack("<i", i + 100))])
    resp = host.recv_type("RESPONSES")["body"]["responses"][0]
    assert np.frombuffer(host.tensor_bytes(resp["outputs"][0]), np.int32).tolist() == [
        100,
        101,
        102,
        103,
    ]


IN_PLACE_INPUT = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.Tensor.empty("X", [1 << 18], np.float32)
            x.as_numpy()[:] = 3
            for _ in range(2):  # the same tensor in two calls
                pb_utils.InferenceRequest(
                    model_name="target", inputs=[x], requested_output_names=["Y"]).exec()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.ones(1, np.float32))]))
        return out
"""


def test_tensor_empty_inputs_are_sent_by_reference(host: StubHost, tmp_path: Path) -> None:
    """A BLS input the model wrote in place goes out as a reference to its
    block, each time it is used; the block is free again once the model
    dropped it and the backend released both references."""
    host.load(tmp_path, IN_PLACE_INPUT)
    places = []
    for batch in (1, 2):
        host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [])]}, id=batch))
        refs = []
        for _ in range(2):
            req = host.recv_type("BLS_REQUEST")
            (t,) = req["body"]["request"]["inputs"]
            assert t["location"] == 1
            assert (np.frombuffer(host.tensor_bytes(t), np.float32) == 3).all()
            refs.append((t["arena_id"], t["offset"]))
            bls_reply(host, req["id"], [f32("Y", [0])])
        assert refs[0] == refs[1]  # not copied: still held when the second went out
        host.recv_type("RESPONSES")
        release = [{"arena_id": a, "offset": o} for a, o in refs]
        host.send(P.encode(P.RELEASE, {"allocations": release}))
        places.append(refs[0])
    assert places[0] == places[1]  # the first batch's block was freed and reused


HALF_BUILT = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            kind, case = r.request_id().split("/")
            if kind == "block":  # written in place: sent by reference
                big = pb_utils.Tensor.empty("B", [1 << 18], np.float32)
                big.as_numpy()[:] = 5
            else:  # copied into the stub's arena
                big = pb_utils.Tensor("B", np.full(1 << 18, 5, np.float32))
            inputs, correlation_id = [big], 0
            if case == "bad_input":  # a second input that cannot be encoded
                inputs.append(pb_utils.Tensor("S", np.array([object()], dtype=object)))
            if case == "bad_sequence":  # out of the frame's range (a u64)
                correlation_id = -1
            try:
                pb_utils.InferenceRequest(
                    model_name="target", inputs=inputs, requested_output_names=["Y"],
                    correlation_id=correlation_id).exec()
            except (pb_utils.TritonModelException, OverflowError):
                pass
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.ones(1, np.float32))]))
        return out
"""


@pytest.mark.parametrize("kind", ["copy", "block"])
def test_a_request_that_fails_to_build_gives_its_arena_space_back(
    host: StubHost, tmp_path: Path, kind: str
) -> None:
    """A BLS request that fails after its first input took arena space (a
    bad second input, or a field out of range when the frame is written)
    gives that space back: the next good call's input lands where the
    first one's did."""
    host.load(tmp_path, HALF_BUILT)
    places = []
    cases = ["good", "bad_input", "good", "bad_sequence", "good"]
    for batch, case in enumerate(cases, 1):
        host.send(P.encode(P.EXECUTE, {"requests": [P.request(f"{kind}/{case}", [])]}, id=batch))
        if case != "good":
            host.recv_type("RESPONSES")
            continue
        req = host.recv_type("BLS_REQUEST")
        (t,) = req["body"]["request"]["inputs"]
        places.append((t["arena_id"], t["offset"]))
        bls_reply(host, req["id"], [f32("Y", [0])])
        host.recv_type("RESPONSES")
        host.send(
            P.encode(
                P.RELEASE, {"allocations": [{"arena_id": t["arena_id"], "offset": t["offset"]}]}
            )
        )
    assert places[0] == places[1] == places[2]


TRACER = """
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            traced = request.request_id() != "plain"
            pb_utils.InferenceRequest(
                model_name="target",
                inputs=[pb_utils.Tensor("X", np.zeros(1, np.float32))],
                requested_output_names=["Y"],
                trace=request.trace() if traced else pb_utils.InferenceTrace(),
            ).exec()
            context = request.trace().get_context() or ""
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("C", np.array([context.encode()], dtype=object))]))
        return out
"""


def test_bls_request_names_the_request_whose_trace_it_passes(
    host: StubHost, tmp_path: Path
) -> None:
    """A call built with trace=request.trace() names that request (batch id,
    position); one with a fresh InferenceTrace() names none. The model sees
    the trace context EXECUTE carried."""
    host.load(tmp_path, TRACER)
    requests = [
        P.request("plain"),
        P.request("traced", trace_context='{"traceparent":"00-ab-cd-01"}'),
    ]
    host.send(P.encode(P.EXECUTE, {"requests": requests}, id=9))
    names = []
    for _ in requests:
        req = host.recv_type("BLS_REQUEST")
        body = req["body"]
        names.append((body["trace_batch_id"], body["trace_request_index"]))
        assert body["request"]["trace_context"] == ""
        bls_reply(host, req["id"], [f32("Y", [0])])
    assert names == [(0, 0), (9, 1)]
    reply = host.recv_type("RESPONSES")
    contexts = [host.tensor_bytes(r["outputs"][0])[4:] for r in reply["body"]["responses"]]
    assert contexts == [b"", b'{"traceparent":"00-ab-cd-01"}']


# A call's outputs, never read as arrays, returned as the model's own (as
# the benchmark's BLS model does).
PASS_ON = """
import triton_python_backend_utils as pb_utils

def call(r):
    x = [pb_utils.get_input_tensor_by_name(r, n) for n in ("INPUT0", "INPUT1")]
    got = pb_utils.InferenceRequest(model_name="add_sub", inputs=x,
                                    requested_output_names=["OUTPUT0", "OUTPUT1"]).exec()
    return pb_utils.InferenceResponse(
        [pb_utils.get_output_tensor_by_name(got, n) for n in ("OUTPUT0", "OUTPUT1")])

class TritonPythonModel:
    def execute(self, requests):
        return [call(r) for r in requests]
"""


def test_outputs_of_a_call_returned_as_they_came_go_back_inline(
    host: StubHost, tmp_path: Path
) -> None:
    """Their bytes and shapes reach Triton as the called model sent them."""
    assert host.load(tmp_path, PASS_ON, config={"name": "bls"})["ok"] is True
    for batch_id in (1, 2):
        inputs = [f32("INPUT0", [1]), f32("INPUT1", [2])]
        host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", inputs)]}, id=batch_id))
        req = host.recv_type("BLS_REQUEST")
        assert req["body"]["model_name"] == "add_sub"
        diff = P.inline("OUTPUT1", 8, [2, 1], struct.pack("<2i", batch_id, -7))  # INT32
        bls_reply(host, req["id"], [f32("OUTPUT0", [0.5, 1.5, 2.5]), diff])
        outs = host.recv_type("RESPONSES")["body"]["responses"][0]["outputs"]
        assert [(o["name"], o["dims"], o["location"]) for o in outs] == [
            ("OUTPUT0", [3], P.LOC_INLINE),
            ("OUTPUT1", [2, 1], P.LOC_INLINE),
        ]
        assert np.frombuffer(host.tensor_bytes(outs[0]), np.float32).tolist() == [0.5, 1.5, 2.5]
        assert struct.unpack("<2i", host.tensor_bytes(outs[1])) == (batch_id, -7)


@pytest.mark.parametrize("spin_us", ["0", "1000000"])
def test_blocking_exec_is_answered_with_and_without_a_spin(
    host: StubHost, tmp_path: Path, spin_us: str
) -> None:
    """bls_spin_microseconds: 0 sleeps at once; a spin longer than the
    answer takes ends with the answer. Both give the model its answer."""
    config = {"name": "bls", "parameters": {"bls_spin_microseconds": {"string_value": spin_us}}}
    assert host.load(tmp_path, CALLER, config=config)["ok"] is True
    for batch_id in (1, 2, 3):
        host.send(P.encode(P.EXECUTE, {"requests": [P.request("r", [f32("A", [1])])]}, id=batch_id))
        req = host.recv_type("BLS_REQUEST")
        bls_reply(host, req["id"], [f32("Y", [batch_id])])
        out = host.recv_type("RESPONSES")["body"]["responses"][0]["outputs"][0]
        assert np.frombuffer(host.tensor_bytes(out), np.float32).tolist() == [2 * batch_id]
