# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The randomized run of the hostile-client suite, for `make fuzz` (not
collected by `make test`: the file name does not start with test_):

    .venv/bin/python -m pytest tests/integration/fuzz_hostile_clients.py -p no:cacheprovider
    TRITONPY_CLIENT_FUZZ_SECONDS=600 TRITONPY_FUZZ_SEED=7 .venv/bin/python -m pytest ...

Hypothesis generates requests from the well-formed request of each model
(hostile_senders.PROBES) with any part replaced by hostile values: ids,
parameter keys and values of every JSON type and nesting, tensor names,
datatypes, shapes of any rank and extreme dims, JSON data of any type,
binary data of any length with any binary_data_size, BYTES elements with
forged length prefixes, requested outputs, sequence and priority
parameters; over HTTP (JSON and binary) and gRPC (ModelInferRequest with
any raw contents and parameters). Only to 127.0.0.1, on one server the run
starts. Each request must get an answer (an error or a success, never a
dropped connection), kill no stub (StubWatch) and, every few requests and
at the end, every model must still answer its well-formed request.

It runs in rounds of ROUND examples, each from the seed plus the round's
number (a failure names its round and prints the request: the same
TRITONPY_FUZZ_SEED replays it), until TRITONPY_CLIENT_FUZZ_SECONDS
(default 60) have passed; then it stops by itself."""

from __future__ import annotations

import copy
import os
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2

from fuzz_seed import SEED
from hostile_cases import MODELS
from hostile_requests import Answer, StubWatch, dumps, grpc_infer, http_infer
from hostile_senders import NOT_UTF8, PROBES, probe
from server import TritonServer, build_repository, running, wait_until

SECONDS = float(os.environ.get("TRITONPY_CLIENT_FUZZ_SECONDS", "60"))
ROUND = 40  # examples per round; every model is probed after each round
KEEP_GOING = bool(os.environ.get("TRITONPY_CLIENT_FUZZ_KEEP_GOING"))

DATATYPES = ["BOOL", "UINT8", "INT8", "INT16", "UINT32", "INT32", "INT64", "UINT64"]
DATATYPES += ["FP16", "BF16", "FP32", "FP64", "BYTES"]
EDGE_INTS = [0, 1, -1, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, -(2**63), 2**64 - 1, 2**64]

# Texts a client may put in an id, a key, a name or a value: bytes that
# are not UTF-8 (a lone continuation byte, an overlong NUL, a surrogate),
# NULs, huge ones; and random ones.
NASTY = [NOT_UTF8, b"\xff", b"\x80", b"\xc0\x80", b"\xed\xa0\x80", b"a\x00b", b"\x00"]
texts = st.one_of(
    st.sampled_from(NASTY),
    st.text(max_size=40),
    st.binary(min_size=1, max_size=40),
    st.integers(1, 300_000).map(lambda n: "x" * n),
)
ints = st.one_of(st.sampled_from(EDGE_INTS), st.integers())
scalars = st.one_of(st.none(), st.booleans(), ints, st.floats(), texts)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=20,
)
names = st.one_of(st.sampled_from(["INPUT0", "INPUT1", "IN", "ROWS", "A", "X"]), texts)
# Dims whose byte size wraps at 2^64 (with 1-, 2-, 4- and 8-byte types).
WRAPS = [2**64, 2**63, 2**62, 2**61]
shapes = st.one_of(
    st.lists(st.sampled_from([0, 1, 2, 3, 4, 17, 2**31, *WRAPS[1:], 2**63 - 1]), max_size=4),
    st.lists(ints, max_size=3),
    st.integers(0, 5000).map(lambda n: [1] * n),
    json_values,
)
# Shapes for JSON data. Not one whose element count is huge: Triton 2.51's
# HTTP frontend allocates that many elements for JSON data and ends the
# whole server with std::bad_alloc, whatever the backend
# (docs/hardening.md, "Hostile clients").
json_shapes = st.one_of(
    st.lists(st.integers(-2, 17), max_size=4),
    st.integers(0, 5000).map(lambda n: [1] * n),
    scalars.filter(lambda v: not isinstance(v, int)),
)


@st.composite
def binary_data(draw: st.DrawFn) -> bytes:
    """Raw bytes, or BYTES elements whose length prefixes may lie."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=600))
    elems = draw(st.lists(st.one_of(st.sampled_from(NASTY), st.binary(max_size=30)), max_size=6))
    return b"".join(
        struct.pack("<I", draw(st.sampled_from([len(e), len(e), 0, 2**32 - 1, len(e) + 9]))) + e
        for e in elems
    )


@st.composite
def as_binary(draw: st.DrawFn, tensor: dict[str, Any]) -> bytes:
    """Turns ``tensor`` into binary data (returned) of any shape: often
    none at all with a shape whose byte size wraps to 0, and a
    binary_data_size that may not match."""
    data = b"" if draw(st.booleans()) else draw(binary_data())
    if not data and draw(st.booleans()):
        tensor["shape"] = [draw(st.sampled_from([*WRAPS[1:], -(2**62)]))]
    elif draw(st.booleans()):
        tensor["shape"] = draw(shapes)
    tensor.pop("data", None)
    size = draw(st.one_of(st.just(len(data)), st.sampled_from(EDGE_INTS), json_values))
    tensor["parameters"] = {"binary_data_size": size}
    return data


@st.composite
def http_request(draw: st.DrawFn) -> tuple[str, bytes, bytes | None]:
    """(model, JSON header, binary data) of one hostile HTTP request: the
    model's well-formed request with one or two of its parts replaced."""
    model = draw(st.sampled_from(MODELS))
    req: dict[Any, Any] = copy.deepcopy(PROBES[model])
    inputs = req["inputs"]
    binary: bytes | None = None
    for _ in range(draw(st.integers(1, 2))):
        part = draw(st.sampled_from(["id", "params", "seq", "input", "binary", "drop", "outputs"]))
        if part == "id":
            req["id"] = draw(st.one_of(texts, json_values))
        elif part == "params":
            keys = st.one_of(texts, st.text(max_size=20))
            req["parameters"] = draw(st.dictionaries(keys, json_values, max_size=8))
        elif part == "seq":
            keys = ["sequence_id", "sequence_start", "sequence_end", "priority", "timeout"]
            value = st.one_of(texts, json_values)
            req.setdefault("parameters", {})[draw(st.sampled_from(keys))] = draw(value)
        elif part == "input" and inputs:
            t = inputs[draw(st.integers(0, len(inputs) - 1))]
            field = draw(st.sampled_from(["name", "datatype", "shape", "data"]))
            t[field] = draw(
                {
                    "name": names,
                    "datatype": st.one_of(st.sampled_from(DATATYPES), texts),
                    "shape": json_shapes,
                    "data": json_values,
                }[field]
            )
        elif part == "binary" and inputs and binary is None:
            binary = draw(as_binary(inputs[draw(st.integers(0, len(inputs) - 1))]))
        elif part == "drop" and inputs:
            inputs.pop(draw(st.integers(0, len(inputs) - 1)))
        elif part == "outputs":
            req["outputs"] = draw(st.lists(st.fixed_dictionaries({"name": names}), max_size=3))
    header = dumps(req)
    if draw(st.integers(0, 19)) == 0:  # cut short
        header = header[: draw(st.integers(0, len(header)))]
    return model, header, binary


@st.composite
def grpc_request(draw: st.DrawFn) -> bytes:
    """A serialized ModelInferRequest with any parameters, inputs and raw
    contents (as many as drawn, not as many as inputs); now and then with
    its bytes flipped."""
    r = service_pb2.ModelInferRequest(model_name=draw(st.sampled_from(MODELS)))
    r.id = draw(st.text(max_size=30))
    for key in draw(st.lists(st.text(max_size=12), max_size=4)):
        p = r.parameters[key]
        kind = draw(st.sampled_from(["bool", "int", "uint", "double", "string"]))
        if kind == "bool":
            p.bool_param = draw(st.booleans())
        elif kind == "int":
            p.int64_param = draw(st.integers(-(2**63), 2**63 - 1))
        elif kind == "uint":
            p.uint64_param = draw(st.integers(0, 2**64 - 1))
        elif kind == "double":
            p.double_param = draw(st.floats())
        else:
            p.string_param = draw(st.text(max_size=50))
    for _ in range(draw(st.integers(0, 3))):
        t = r.inputs.add(
            name=draw(st.sampled_from(["INPUT0", "IN", "ROWS", "IN_STRING", "IN_INT64", "Z"])),
            datatype=draw(st.sampled_from([*DATATYPES, "??"])),
            shape=draw(
                st.lists(
                    st.one_of(
                        st.sampled_from([4, 0, -(2**62), 2**62, 2**61]),
                        st.integers(-(2**63), 2**63 - 1),
                    ),
                    max_size=4,
                )
            ),
        )
        if draw(st.booleans()):
            t.contents.bytes_contents.extend(draw(st.lists(st.binary(max_size=20), max_size=4)))
    r.raw_input_contents.extend(draw(st.lists(st.binary(max_size=64), max_size=4)))
    data = bytearray(r.SerializeToString())
    for _ in range(draw(st.integers(0, 2))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("fuzz_clients")
    with running(TritonServer(build_repository(work / "repo", MODELS), work)) as srv:
        yield srv


def all_answer(srv: TritonServer) -> list[str]:
    """The models that do not answer their well-formed request."""
    return [m for m in MODELS if not probe(srv, m).ok]


def answered(a: Answer, what: str) -> None:
    """An answer, not a dropped connection; a success or an error text."""
    assert a.status != 0, f"no answer to {what}: {a.message}"
    assert a.ok or a.message, f"an error without a message for {what}: {a}"


def describe(request: tuple[str, bytes, bytes | None] | bytes) -> str:
    if isinstance(request, bytes):
        return f"gRPC {request[:300]!r}"
    model, header, binary = request
    return f"HTTP {model} {header[:300]!r} + {(binary or b'')[:100]!r}"


def test_random_hostile_requests_kill_no_stub(fuzz_server: TritonServer) -> None:
    """Stops at the first stub death, unless TRITONPY_CLIENT_FUZZ_KEEP_GOING
    is set: then every request that killed a stub is listed at the end."""
    watch = [StubWatch(fuzz_server)]
    deadline = time.monotonic() + SECONDS
    rounds = 0
    sent = [0]  # requests sent, by every round
    killers: list[str] = []
    while time.monotonic() < deadline:

        @seed(SEED + rounds)
        @settings(
            max_examples=ROUND,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(st.one_of(http_request(), grpc_request()))
        def one(request: tuple[str, bytes, bytes | None] | bytes) -> None:
            if time.monotonic() > deadline:
                return
            sent[0] += 1
            if isinstance(request, bytes):
                answer = grpc_infer(fuzz_server, request, timeout=60)
            else:
                answer = http_infer(fuzz_server, *request, timeout=60)
            answered(answer, describe(request))
            deaths = watch[0].deaths()
            if deaths and KEEP_GOING:
                killers.append(f"{describe(request)}: {deaths[0]}")
                wait_until(lambda: not all_answer(fuzz_server), timeout=120)
                watch[0] = StubWatch(fuzz_server)
                return
            assert deaths == [], f"a stub died after {describe(request)}"

        try:
            one()
        except Exception as e:
            raise AssertionError(f"round {rounds} (seed {SEED + rounds})") from e
        assert all_answer(fuzz_server) == [], f"after round {rounds}"
        assert watch[0].deaths() == [], f"round {rounds}"
        rounds += 1
    print(f"client fuzz: {sent[0]} requests in {rounds} rounds, seed {SEED}")
    assert killers == [], f"{len(killers)} requests killed a stub:\n" + "\n".join(killers[:20])
