# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The catalogue of hostile requests (docs/hardening.md, "Hostile
clients"): for each kind, the request (HTTP or gRPC, to one of MODELS) and
the class of answer it must get. test_hostile_clients.py sends each once;
fuzz_hostile_clients.py (`make fuzz`) builds random ones from PROBES.

The answer is the official backend's where it answers (``OK``: 200 from
Triton and the official Python backend, as tried on tritonserver 2.51), or
an error whose message holds every part of ``Err(...)``: Triton's own text
where Triton refuses the request before any backend sees it, the official
backend's text where it refuses it, tritonpy's naming the model, the
request id and the tensor where the official backend has none (its stub
dies)."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hostile_requests import (
    Answer,
    bytes_tensor,
    dumps,
    grpc_infer,
    half_sent,
    http_infer,
    http_raw,
)
from hostile_senders import (
    NOT_UTF8,
    PROBES,
    FP32x4,
    batch_rows,
    batch_with_one_bad,
    disconnect_after_sending,
    disconnect_mid_stream,
    echoed_bytes,
    grpc_bytes,
    grpc_contents,
    grpc_id_not_utf8,
    grpc_name_not_utf8,
    grpc_params,
    grpc_shape,
    grpc_typed_contents,
    stream_cancel,
)
from server import TritonServer

__all__ = ["CASES", "MODELS", "Case", "Expect"]

# The example models the cases go to (examples/model_repository: plain,
# decoupled, BYTES, dynamic batching, async execute) and three test models:
# params (echoes the request's parameters), identity (every datatype, any
# length, every input optional), shapes (a [-1, -1] input).
MODELS = ["add_sub", "repeat", "iris_preprocess", "auto_complete_batch", "async_sleep"]
MODELS += ["params", "identity", "shapes"]

HUGE = 200 * 1024  # past MAX_FRAME (128 KiB) on its own
UINT64_MAX = 2**64 - 1


@dataclass(frozen=True)
class Expect:
    """The class of answer a case must get: ``ok`` (and ``check`` of the
    answer, when given), or an error whose message holds all ``parts``."""

    ok: bool
    parts: tuple[str, ...] = ()
    check: Callable[[Answer], bool] | None = None

    def holds(self, a: Answer) -> bool:
        if a.ok != self.ok:
            return False
        if self.ok:
            return self.check is None or self.check(a)
        return bool(a.message) and all(p in a.message for p in self.parts)


def OK(check: Callable[[Answer], bool] | None = None) -> Expect:  # noqa: N802
    return Expect(True, check=check)


def Err(*parts: str) -> Expect:  # noqa: N802
    return Expect(False, parts)


@dataclass(frozen=True)
class Case:
    """One kind of hostile request: ``send(srv)`` sends it; ``model`` must
    still answer its probe afterwards."""

    model: str
    send: Callable[[TritonServer], Answer]
    expect: Expect


def http_case(model: str, request: Any, expect: Expect) -> Case:
    """An HTTP request to ``model``: a JSON header (an object or bytes), or
    (header, binary data after it)."""
    header, binary = request if isinstance(request, tuple) else (request, None)
    return Case(model, lambda srv: http_infer(srv, model, header, binary), expect)


def add_sub(**over: Any) -> dict[str, Any]:
    """add_sub's well-formed request with the fields ``over``."""
    return {"inputs": [dict(t) for t in PROBES["add_sub"]["inputs"]], **over}


def input0(**over: Any) -> dict[str, Any]:
    """add_sub's request with INPUT0's fields ``over``."""
    req = add_sub()
    req["inputs"][0].update(over)
    return req


def extra_input(**tensor: Any) -> dict[str, Any]:
    """add_sub's request with a third input."""
    req = add_sub()
    req["inputs"].append({"shape": [1], "datatype": "FP32", "data": [1], **tensor})
    return req


def one(name: str, datatype: str, shape: list[Any], data: Any = (), **over: Any) -> dict[str, Any]:
    """A request of the one input ``name`` with JSON ``data``."""
    tensor = {"name": name, "shape": shape, "datatype": datatype, "data": list(data)}
    return {"inputs": [tensor], **over}


def raw(
    name: str, datatype: str, shape: list[Any], data: bytes, size: Any = None, **over: Any
) -> tuple[dict[str, Any], bytes]:
    """(header, binary) of the one input ``name`` as binary ``data``, whose
    binary_data_size is ``size`` (default: its length)."""
    size = len(data) if size is None else size
    tensor = {"name": name, "shape": shape, "datatype": datatype}
    tensor["parameters"] = {"binary_data_size": size}
    return {"inputs": [tensor], **over}, data


def add_sub_binary(size: Any) -> tuple[dict[str, Any], bytes]:
    """add_sub's inputs as binary data, INPUT0's binary_data_size ``size``."""
    req = add_sub()
    for t, n in zip(req["inputs"], (size, 16), strict=True):
        del t["data"]
        t["parameters"] = {"binary_data_size": n}
    return req, FP32x4 * 2


def with_params(model: str, params: dict[Any, Any]) -> dict[str, Any]:
    """``model``'s well-formed request with request parameters ``params``."""
    return {**PROBES[model], "parameters": params}


def echoed(params: dict[str, Any]) -> Callable[[Answer], bool]:
    """params answered with exactly ``params``: its PARAMS output (the JSON
    of the model's ``request.parameters()``) and its response parameter
    ``count``."""

    def check(a: Answer) -> bool:
        got = json.loads(a.output("PARAMS")[0])
        return bool(got == params and a.body["parameters"]["count"] == len(params))

    return check


def good(a: Answer) -> bool:
    """add_sub answered 1..4 + 1..4."""
    return bool(a.output("OUTPUT0") == [2, 4, 6, 8])


def incomplete(name: str, length: int, left: int) -> Expect:
    """The official backend's refusal of BYTES data cut short."""
    return Err(
        f"incomplete string data for inference input '{name}', expecting string of length "
        f"{length} but only {left} bytes available"
    )


PARAMS_JSON = dumps(PROBES["params"])[:-1]  # params' request, still open
REPLACED = NOT_UTF8.decode("utf-8", "replace")
EVERY_SCALAR = {"b": True, "i": -(2**63), "u": 2**63 - 1, "s": "", "f": 0.5}
MANY_PARAMS = {f"k{i}": i for i in range(2000)}
ALL_BYTES = [bytes(range(256)), b"", NOT_UTF8]

CASES: dict[str, Case] = {
    # --- request ids
    "id_not_utf8": http_case("add_sub", add_sub(id=NOT_UTF8), OK(good)),
    # Pure ASCII JSON: the escape of a lone surrogate, which Triton's
    # parser turns into bytes that are not UTF-8.
    "id_lone_surrogate_escape": http_case(
        "add_sub", dumps(add_sub())[:-1] + b',"id":"\\udcff"}', OK(good)
    ),
    "id_huge": http_case("add_sub", add_sub(id="i" * HUGE), OK(good)),
    "id_wrong_type": http_case("add_sub", add_sub(id=12), Err("Unable to parse 'id'")),
    "id_huge_on_a_failing_request": http_case(
        "iris_preprocess",
        one("ROWS", "BYTES", [1], ["x"], id="r" * HUGE),
        Err("iris_preprocess: row 0 ('x') is not four comma-separated numbers"),
    ),
    # Malformed BYTES: on tritonpy today the model's execute() raises, and
    # its error names the batch's request ids.
    "id_huge_on_a_raising_request": http_case(
        "iris_preprocess",
        raw("ROWS", "BYTES", [1], struct.pack("<I", 9) + b"5", id="r" * HUGE),
        incomplete("ROWS", 9, 1),
    ),
    "id_not_utf8_in_a_batch_of_good_ones": Case(
        "auto_complete_batch", batch_with_one_bad({"id": NOT_UTF8}), OK()
    ),
    "error_text_quoting_a_huge_input": http_case(
        "iris_preprocess",
        one("ROWS", "BYTES", [1], ["x" * 300_000]),
        Err("iris_preprocess: row 0 ('xxx", "is not four comma-separated numbers"),
    ),
    # gRPC's parser refuses any string field that is not UTF-8.
    "grpc_id_not_utf8": Case("add_sub", grpc_id_not_utf8, Err("Unable to parse request")),
    # --- request parameters
    # Bytes that are not UTF-8 reach the model replaced (U+FFFD).
    "param_key_and_value_not_utf8": http_case(
        "params",
        with_params("params", {NOT_UTF8: NOT_UTF8}),
        OK(echoed({REPLACED: REPLACED})),
    ),
    "param_huge_key_and_value": http_case(
        "params",
        with_params("params", {"k" * HUGE: "v" * HUGE}),
        OK(echoed({"k" * HUGE: "v" * HUGE})),
    ),
    "param_every_scalar_type": http_case(
        "params",
        with_params("params", EVERY_SCALAR),
        OK(echoed(EVERY_SCALAR)),
    ),
    "param_many": http_case("params", with_params("params", MANY_PARAMS), OK(echoed(MANY_PARAMS))),
    "param_null": http_case(
        "params", with_params("params", {"n": None}), Err("parameter 'n' has invalid type")
    ),
    "param_nested_object": http_case(
        "params", with_params("params", {"o": {"a": [1]}}), Err("parameter 'o' has invalid type")
    ),
    "param_nested_deep": http_case(
        "params",
        PARAMS_JSON + b',"parameters":{"d":' + b"[" * 100000,
        Err("failed to parse the request JSON buffer"),
    ),
    "param_with_nul_bytes": http_case(
        "params",
        PARAMS_JSON + b',"parameters":{"a\\u0000b":"c\\u0000d"}}',
        Err("parameter key"),
    ),
    "grpc_param_every_type": Case(
        "add_sub",
        grpc_params(b=False, i=-(2**63), d=float("nan"), s=NOT_UTF8.decode("latin-1") * 1000),
        OK(),
    ),
    "grpc_param_uint64": Case(
        "add_sub", grpc_params(u=UINT64_MAX), Err("invalid value type for 'u' parameter")
    ),
    # --- tensor names and datatypes
    "input_name_not_utf8": http_case(
        "add_sub", extra_input(name=NOT_UTF8), Err("expected 2 inputs but got 3 inputs")
    ),
    "input_name_huge": http_case(
        "add_sub", extra_input(name="n" * HUGE), Err("expected 2 inputs but got 3 inputs")
    ),
    "input_name_not_utf8_optional": http_case(
        "identity", one(NOT_UTF8 * 1000, "INT32", [1], [1]), Err("unexpected inference input")
    ),
    "grpc_input_name_not_utf8": Case("add_sub", grpc_name_not_utf8, Err("Unable to parse request")),
    "input_unknown": http_case(
        "add_sub", extra_input(name="INPUT9"), Err("expected 2 inputs but got 3", "INPUT9")
    ),
    "input_missing": http_case(
        "add_sub", {"inputs": add_sub()["inputs"][:1]}, Err("expected 2 inputs but got 1")
    ),
    "input_none_all_optional": http_case("identity", {"inputs": []}, OK()),
    "input_duplicate": http_case(
        "add_sub",
        {"inputs": add_sub()["inputs"] * 2},
        Err("input 'INPUT0' already exists in request"),
    ),
    "datatype_wrong": http_case(
        "add_sub",
        input0(datatype="INT32"),
        Err("inference input 'INPUT0' data-type is 'INT32', but model 'add_sub' expects 'FP32'"),
    ),
    "datatype_unknown": http_case(
        "add_sub", input0(datatype="FP128"), Err("invalid datatype for input INPUT0")
    ),
    "bf16_from_json": http_case(
        "identity",
        one("IN_BF16", "BF16", [2], [1.5, -2]),
        Err("receiving BF16 data via JSON is not supported"),
    ),
    # --- shapes and sizes
    "binary_shorter_than_shape": http_case(
        "add_sub",
        (add_sub_binary(12)[0], FP32x4[:12] + FP32x4),
        Err("input byte size mismatch for input 'INPUT0'"),
    ),
    "json_data_shorter_than_shape": http_case(
        "add_sub", input0(data=[1, 2, 3]), Err("Unable to parse 'data'")
    ),
    # The byte size wraps at 2^64 to the 0 bytes sent: Triton lets it
    # through; the official backend's stub dies for good.
    "shape_overflows_int64_binary_size_0": http_case(
        "identity",
        raw("IN_FP32", "FP32", [2**62], b"", id="overflow"),
        Err("identity", "overflow", "IN_FP32"),
    ),
    "grpc_shape_overflows_int64": Case(
        "identity",
        grpc_shape("IN_INT64", "INT64", [2**61], b""),
        Err("identity", "grpc-shape", "IN_INT64"),
    ),
    "grpc_dims_negative_wrapping_to_0": Case(
        "identity",
        grpc_shape("IN_INT32", "INT32", [-(2**62)], b""),
        Err("identity", "grpc-shape", "IN_INT32"),
    ),
    # No overflow: two negative dims whose product is the 4 elements sent.
    # Triton lets it through.
    "grpc_negative_dims_with_a_positive_product": Case(
        "shapes",
        grpc_shape("X", "FP32", [-2, -2], b"\0" * 16, model="shapes"),
        Err("shapes", "grpc-shape", "'X'"),
    ),
    "shape_huge_binary_size_0": http_case(
        "identity",
        raw("IN_UINT8", "UINT8", [2**40], b""),
        Err("input byte size mismatch for input 'IN_UINT8'"),
    ),
    "bytes_shape_huge_binary_size_0": http_case(
        "identity",
        raw("IN_STRING", "BYTES", [2**62], b""),
        Err("expected 4611686018427387904 string elements for inference input 'IN_STRING'"),
    ),
    "dims_negative": http_case(
        "identity", one("IN_INT32", "INT32", [-4]), Err("Unable to parse 'shape'")
    ),
    "dims_wrong_type": http_case(
        "identity", one("IN_INT32", "INT32", ["1"], [1]), Err("Unable to parse 'shape'")
    ),
    "grpc_dims_negative": Case(
        "identity",
        grpc_shape("IN_INT32", "INT32", [-4], b""),
        Err("input byte size mismatch for input 'IN_INT32'"),
    ),
    "grpc_dims_negative_pair": Case(
        "identity",
        grpc_shape("IN_INT32", "INT32", [-2, -2], b"\0" * 16),
        Err("unexpected shape for input 'IN_INT32'"),
    ),
    "dims_zero_where_fixed": http_case(
        "add_sub", input0(shape=[0], data=[]), Err("unexpected shape for input 'INPUT0'")
    ),
    "rank_huge": http_case(
        "identity",
        one("IN_INT32", "INT32", [1] * 4096, [1]),
        Err("unexpected shape for input 'IN_INT32'"),
    ),
    "batch_past_max_batch_size": http_case(
        "auto_complete_batch", batch_rows(17), Err("batch-size must be <= 16")
    ),
    "batch_of_zero_rows": http_case(
        "auto_complete_batch", batch_rows(0), Err("input byte size mismatch")
    ),
    "binary_data_size_huge": http_case(
        "add_sub",
        add_sub_binary(UINT64_MAX),
        Err("unexpected size for input 'INPUT0'"),
    ),
    "binary_data_size_negative": http_case(
        "add_sub", add_sub_binary(-16), Err("Unable to parse 'binary_data_size'")
    ),
    "binary_data_size_string": http_case(
        "add_sub", add_sub_binary("16"), Err("Unable to parse 'binary_data_size'")
    ),
    "header_length_past_the_body": Case(
        "add_sub",
        lambda srv: http_raw(
            srv,
            "/v2/models/add_sub/infer",
            dumps(add_sub()),
            {"Inference-Header-Content-Length": "100000"},
        ),
        Err("inference header size should be in range"),
    ),
    "empty_tensor": http_case(
        "identity", one("IN_FP32", "FP32", [0]), OK(lambda a: a.output("OUT_FP32") == [])
    ),
    "empty_bytes_tensor": http_case(
        "identity", one("IN_STRING", "BYTES", [0]), OK(lambda a: a.output("OUT_STRING") == [])
    ),
    # --- BYTES elements
    "bytes_length_prefix_past_the_end": http_case(
        "iris_preprocess",
        raw("ROWS", "BYTES", [1], struct.pack("<I", 1000) + b"5.1,"),
        incomplete("ROWS", 1000, 4),
    ),
    "bytes_length_prefix_huge": http_case(
        "identity",
        raw("IN_STRING", "BYTES", [2], bytes_tensor([b"a"]) + b"\xff" * 4),
        incomplete("IN_STRING", 2**32 - 1, 0),
    ),
    "bytes_count_short_of_shape": http_case(
        "identity",
        raw("IN_STRING", "BYTES", [3], bytes_tensor([b"ab", b"cd"])),
        Err("expected 3 string elements for inference input 'IN_STRING'"),
    ),
    "bytes_with_nul_and_bad_utf8": Case(
        "identity", grpc_bytes(3, ALL_BYTES), OK(echoed_bytes(ALL_BYTES))
    ),
    "bytes_bad_utf8_to_a_text_model": http_case(
        "iris_preprocess",
        raw("ROWS", "BYTES", [1], bytes_tensor([NOT_UTF8])),
        Err("iris_preprocess: row 0"),
    ),
    "bytes_json_data_not_text": http_case(
        "identity", one("IN_STRING", "BYTES", [2], [1, None]), Err("Unable to parse JSON bytes")
    ),
    "grpc_bytes_count_mismatch": Case(
        "identity",
        grpc_bytes(2, [b"a", b"\x00\xff", b"c"]),
        Err("unexpected number of string elements 3 for inference input 'IN_STRING'"),
    ),
    "bool_bytes_not_0_or_1": http_case(
        "identity", raw("IN_BOOL", "BOOL", [3], b"\x00\x02\xff"), OK()
    ),
    # --- JSON data
    "json_data_strings_for_fp32": http_case(
        "add_sub", input0(data=["a", "b", "c", "d"]), Err("Unable to parse 'data'")
    ),
    # Triton casts JSON numbers to the input's type as C does.
    "json_data_out_of_range": http_case(
        "identity", one("IN_INT8", "INT8", [2], [1000, -1000]), OK()
    ),
    "json_not_an_object": http_case("add_sub", b"[1, 2, 3]", Err("Unable to parse 'inputs'")),
    "json_cut_short": http_case(
        "add_sub", dumps(add_sub())[:-7], Err("failed to parse the request JSON buffer")
    ),
    # --- outputs
    "output_unknown": http_case(
        "add_sub",
        add_sub(outputs=[{"name": "OUTPUT9"}]),
        Err("unexpected inference output 'OUTPUT9'"),
    ),
    "output_name_not_utf8": http_case(
        "add_sub", add_sub(outputs=[{"name": NOT_UTF8}]), Err("unexpected inference output")
    ),
    "output_repeated": http_case("add_sub", add_sub(outputs=[{"name": "OUTPUT0"}] * 3), OK(good)),
    # --- sequences, priority, timeout: a model without a sequence batcher
    # still gets the correlation id; a model whose scheduler does not use
    # priority or timeout ignores them.
    "sequence_id_not_utf8": http_case(
        "add_sub", add_sub(parameters={"sequence_id": NOT_UTF8}), OK(good)
    ),
    "sequence_id_not_utf8_to_a_batcher": http_case(
        "auto_complete_batch",
        batch_rows(1, parameters={"sequence_id": NOT_UTF8, "sequence_start": True}),
        OK(),
    ),
    "sequence_id_with_nul_and_quotes": http_case(
        "add_sub",
        dumps(add_sub())[:-1] + b',"parameters":{"sequence_id":"a\\u0000\\"\\\\\'b"}}',
        OK(good),
    ),
    "sequence_id_huge_string": http_case(
        "add_sub",
        add_sub(parameters={"sequence_id": "s" * HUGE}),
        Err("string correlation ID cannot be longer than 128 characters"),
    ),
    "sequence_id_uint64_max": http_case(
        "add_sub", add_sub(parameters={"sequence_id": UINT64_MAX}), OK(good)
    ),
    "sequence_flags_wrong_type": http_case(
        "add_sub",
        add_sub(parameters={"sequence_start": "yes", "sequence_end": 7}),
        Err("Unable to parse 'sequence_start'"),
    ),
    "priority_extremes": http_case(
        "add_sub", add_sub(parameters={"priority": UINT64_MAX}), OK(good)
    ),
    "priority_negative": http_case(
        "add_sub", add_sub(parameters={"priority": -1}), Err("Unable to parse 'priority'")
    ),
    "timeout_extremes": http_case("add_sub", add_sub(parameters={"timeout": UINT64_MAX}), OK(good)),
    "timeout_extremes_to_a_batcher": http_case(
        "auto_complete_batch",
        batch_rows(1, parameters={"timeout": UINT64_MAX, "priority": UINT64_MAX}),
        OK(),
    ),
    "timeout_one_microsecond": http_case(
        "async_sleep", with_params("async_sleep", {"timeout": 1}), OK()
    ),
    # --- gRPC framing (Triton 2.51 reads as many raw contents as inputs)
    "grpc_raw_contents_too_many": Case("add_sub", grpc_contents(3), OK()),
    "grpc_raw_contents_too_few": Case(
        "add_sub", grpc_contents(1), Err("unable to find data for input tensor 'INPUT1'")
    ),
    "grpc_typed_contents_wrong_type": Case(
        "add_sub", grpc_typed_contents, Err("unexpected explicit tensor data for input tensor")
    ),
    "grpc_not_a_message": Case(
        "add_sub", lambda srv: grpc_infer(srv, b"\xff" * 64), Err("Unable to parse request")
    ),
    # --- the connection. A body cut short gets nothing (or an error): the
    # server cannot tell a slow client from a gone one.
    "http_body_cut_short": Case(
        "add_sub", lambda srv: half_sent(srv, "add_sub", dumps(add_sub()), 40), Err()
    ),
    "client_disconnect_after_sending": Case(
        "async_sleep", disconnect_after_sending, OK(lambda a: a.body == {"success": 1, "fail": 0})
    ),
    "client_disconnect_mid_stream": Case("repeat", disconnect_mid_stream, OK()),
    "stream_cancelled_mid_way": Case("repeat", stream_cancel("hostile-cancel"), OK()),
    # The model logs the cancellation with the request id: a log line past
    # MAX_FRAME, of the client's making.
    "stream_cancelled_with_a_huge_id": Case("repeat", stream_cancel("c" * HUGE), OK()),
}
