# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""pb_utils: dtype tables, Tensor wire round trips, BYTES codec, errors,
requests, responses and config lookups. DLPack is in test_pb_utils_dlpack.py."""

from __future__ import annotations

import asyncio
import json
import struct

import numpy as np
import pytest

from tritonpy import pb_utils as pb
from tritonpy.pb_utils import Tensor, TritonModelException
from tritonpy.stub._batch import request_from_stub

# Triton code, numpy dtype, sample values.
FIXED = [
    (1, np.bool_, [True, False, True, True, False, False]),
    (2, np.uint8, [0, 1, 2, 127, 128, 255]),
    (3, np.uint16, [0, 1, 2, 300, 40000, 65535]),
    (4, np.uint32, [0, 1, 2, 70000, 2**31, 2**32 - 1]),
    (5, np.uint64, [0, 1, 2, 2**40, 2**63, 2**64 - 1]),
    (6, np.int8, [0, 1, -1, 127, -128, 5]),
    (7, np.int16, [0, 1, -1, 32767, -32768, 5]),
    (8, np.int32, [0, 1, -1, 2**31 - 1, -(2**31), 5]),
    (9, np.int64, [0, 1, -1, 2**63 - 1, -(2**63), 5]),
    (10, np.float16, [0.0, 1.5, -2.25, 65504.0, np.inf, -0.0]),
    (11, np.float32, [0.0, 1.5, -2.25, 3.4e38, np.inf, 1e-30]),
    (12, np.float64, [0.0, 1.5, -2.25, 1.7e308, -np.inf, 1e-300]),
]
FIXED_IDS = [np.dtype(t).name for _, t, _ in FIXED]


def wire_bytes(buf) -> bytes:
    view = memoryview(buf)
    assert view.ndim == 1 and view.c_contiguous  # what the stub relies on
    return view.tobytes()


def roundtrip(t: Tensor) -> Tensor:
    """Send ``t`` through the wire form into a fresh writable buffer."""
    name, dtype, dims, buf = t._to_wire()
    return Tensor._from_wire(name, dtype, dims, memoryview(bytearray(wire_bytes(buf))))


def serialize_reference(values: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(v)) + v for v in values)


# ------------------------------------------------------------------ module


def test_public_names():
    public = {n for n in dir(pb) if not n.startswith("_")}
    assert public == set(pb.__all__)
    assert len(pb.__all__) == len(set(pb.__all__))


def test_constants():
    assert pb.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START == 1
    assert pb.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END == 2
    assert pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL == 1
    assert pb.TRITONSERVER_REQUEST_RELEASE_ALL == 1
    assert pb.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE == 2
    assert pb.TRITONSERVER_MEMORY_GPU == 0
    assert pb.TRITONSERVER_MEMORY_CPU == 1


# ------------------------------------------------------------------ dtype tables


@pytest.mark.parametrize("code,np_type,_", FIXED, ids=FIXED_IDS)
def test_type_tables_fixed(code, np_type, _):
    assert pb.triton_to_numpy_type(code) is np_type
    assert pb.numpy_to_triton_type(np_type) == code
    assert pb.numpy_to_triton_type(np.dtype(np_type)) == code


def test_type_tables_special():
    assert pb.triton_to_numpy_type(13) is np.object_
    assert pb.triton_to_numpy_type(14) is None  # BF16: no numpy type
    assert pb.triton_to_numpy_type(0) is None
    assert pb.triton_to_numpy_type(99) is None
    assert pb.numpy_to_triton_type(np.object_) == 13
    assert pb.numpy_to_triton_type(np.bytes_) == 13
    assert pb.numpy_to_triton_type(np.dtype("S7")) == 13
    assert pb.numpy_to_triton_type(np.complex64) is None
    assert pb.numpy_to_triton_type(np.dtype("datetime64[s]")) is None
    assert pb.numpy_to_triton_type(None) is None


def test_triton_string_to_numpy():
    assert pb.triton_string_to_numpy("TYPE_FP32") is np.float32
    assert pb.triton_string_to_numpy("TYPE_STRING") is np.object_
    assert pb.triton_string_to_numpy("TYPE_BOOL") is bool
    assert pb.triton_string_to_numpy("TYPE_UINT64") is np.uint64
    with pytest.raises(KeyError):
        pb.triton_string_to_numpy("TYPE_BF16")


# ------------------------------------------------------------------ fixed-size tensors


@pytest.mark.parametrize("code,np_type,values", FIXED, ids=FIXED_IDS)
def test_fixed_roundtrip(code, np_type, values):
    arr = np.array(values, dtype=np_type).reshape(2, 3)
    t = Tensor("IN", arr)
    assert t.name() == "IN"
    assert t.triton_dtype() == code
    assert t.shape() == [2, 3]
    assert t.is_cpu()
    assert t.as_numpy() is arr
    name, dtype, dims, buf = t._to_wire()
    assert (name, dtype, dims) == ("IN", code, (2, 3))
    assert wire_bytes(buf) == arr.tobytes()
    back = roundtrip(t)
    out = back.as_numpy()
    assert out.dtype == np.dtype(np_type)
    assert out.shape == (2, 3)
    np.testing.assert_array_equal(out, arr)
    assert back.triton_dtype() == code and back.shape() == [2, 3]


@pytest.mark.parametrize("code,np_type,values", FIXED, ids=FIXED_IDS)
def test_fixed_from_wire_is_zero_copy(code, np_type, values):
    arr = np.array(values, dtype=np_type)
    raw = bytearray(arr.tobytes())
    t = Tensor._from_wire("X", code, (6,), memoryview(raw))
    view = t.as_numpy()
    assert view is t.as_numpy()  # cached
    assert view.flags.writeable
    raw[0 : arr.itemsize] = np.array([values[1]], dtype=np_type).tobytes()
    assert view[0] == arr[1]
    view[5] = arr[0]
    assert bytes(raw[5 * arr.itemsize :]) == arr[:1].tobytes()
    # The wire form of an untouched wire tensor is the same memory.
    assert t._to_wire()[3].obj is raw


def test_fixed_size_mismatch_names_tensor():
    with pytest.raises(TritonModelException, match="'INPUT0'.*needs 24 bytes, got 20"):
        Tensor._from_wire("INPUT0", 11, (2, 3), memoryview(bytearray(20)))
    with pytest.raises(TritonModelException, match="'INPUT0'"):
        Tensor._from_wire("INPUT0", 9, (), memoryview(bytearray(4)))


def test_from_wire_rejects_bad_dtype_and_dims():
    with pytest.raises(TritonModelException, match="'A'.*data type code 42"):
        Tensor._from_wire("A", 42, (1,), bytearray(4))
    with pytest.raises(TritonModelException, match="'A'.*negative"):
        Tensor._from_wire("A", 11, (-1,), bytearray(0))


@pytest.mark.parametrize("code,np_type,values", FIXED, ids=FIXED_IDS)
def test_zero_size_and_scalar(code, np_type, values):
    empty = np.zeros((0, 3), dtype=np_type)
    back = roundtrip(Tensor("E", empty))
    assert back.as_numpy().shape == (0, 3) and back.shape() == [0, 3]
    assert back.as_numpy().dtype == np.dtype(np_type)
    scalar = np.array(values[1], dtype=np_type)
    t = Tensor("S", scalar)
    assert t.shape() == []
    back = roundtrip(t)
    assert back.as_numpy().shape == ()
    assert back.as_numpy()[()] == scalar[()]


def test_non_contiguous_fixed():
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    for arr in (base[:, ::2], base.T, base[::-1], np.asfortranarray(base)):
        t = Tensor("NC", arr)
        assert t.as_numpy() is arr  # kept as given
        name, dtype, dims, buf = t._to_wire()
        assert dims == arr.shape
        assert wire_bytes(buf) == np.ascontiguousarray(arr).tobytes()
        np.testing.assert_array_equal(roundtrip(t).as_numpy(), arr)


def test_big_endian_goes_out_little_endian():
    arr = np.arange(4, dtype=">f4")
    t = Tensor("BE", arr)
    assert t.triton_dtype() == 11
    assert wire_bytes(t._to_wire()[3]) == arr.astype("<f4").tobytes()


def test_platform_aliases():
    assert Tensor("a", np.zeros(2, dtype=np.intc)).triton_dtype() == 8
    assert Tensor("b", np.zeros(2, dtype=np.longlong)).triton_dtype() == 9
    assert Tensor("c", np.zeros(2, dtype=np.ulonglong)).triton_dtype() == 5


def test_subclass_and_object_arrays_keep_their_codes():
    masked = np.ma.masked_array(np.arange(3, dtype=np.float32))
    assert Tensor("m", masked).triton_dtype() == 11
    assert Tensor("m", masked).as_numpy() is masked
    assert Tensor("o", np.array([b"x"], dtype=object)).triton_dtype() == 13


# ------------------------------------------------------------------ constructor errors


@pytest.mark.parametrize(
    "arr",
    [
        np.zeros(2, dtype=np.complex64),
        np.zeros(2, dtype="datetime64[s]"),
        np.zeros(2, dtype="timedelta64[s]"),
        np.zeros(2, dtype=[("a", "i4")]),
        np.zeros(2, dtype="V4"),
    ],
    ids=["complex", "datetime", "timedelta", "struct", "void"],
)
def test_unsupported_dtypes(arr):
    with pytest.raises(TritonModelException, match="'T'.*not supported"):
        Tensor("T", arr)


def test_constructor_inputs():
    with pytest.raises(TritonModelException, match="empty string"):
        Tensor("", np.zeros(1))
    # Wrong argument types are TypeErrors, the array checked first, as the
    # official argument conversion does (upstream argument_validation).
    with pytest.raises(TypeError, match="'T'.*got None"):
        Tensor("T", None)
    with pytest.raises(TypeError, match="got None"):
        Tensor("", None)
    with pytest.raises(TypeError, match="name must be a str"):
        Tensor(3, np.zeros(1))
    with pytest.raises(TypeError, match="name must be a str"):
        Tensor(None, np.zeros(1))
    # Array-likes are converted, as pybind11's py::array does officially.
    t = Tensor("L", [[1, 2], [3, 4]])
    assert t.shape() == [2, 2] and t.triton_dtype() == 9
    assert Tensor("B", [b"ab", b"c"]).triton_dtype() == 13


# ------------------------------------------------------------------ BYTES tensors


def test_bytes_object_roundtrip():
    arr = np.array([[b"a", "bc"], ["", "\u00fc\u20ac\U0001d11e"]], dtype=object)
    t = Tensor("S", arr)
    assert t.triton_dtype() == 13
    assert t.as_numpy() is arr
    name, dtype, dims, buf = t._to_wire()
    assert dims == (2, 2)
    assert wire_bytes(buf) == serialize_reference(
        [b"a", b"bc", b"", "\u00fc\u20ac\U0001d11e".encode()]
    )
    out = roundtrip(t).as_numpy()
    assert out.dtype == object and out.shape == (2, 2)
    assert out.tolist() == [[b"a", b"bc"], [b"", "\u00fc\u20ac\U0001d11e".encode()]]
    assert all(type(x) is bytes for x in out.flat)


def test_bytes_from_s_array_strips_trailing_nuls_like_numpy():
    arr = np.array([b"abc", b"a\x00b", b"", b"xy\x00"], dtype="S4")
    expected = list(arr.tolist())  # numpy's own view of the elements
    data = wire_bytes(Tensor("S", arr)._to_wire()[3])
    assert data == serialize_reference(expected)
    assert data == pb.serialize_byte_tensor(arr)


def test_bytes_from_u_array():
    arr = np.array(["h\u00e9llo", "\u20ac\U0001d11e", "", "plain"])
    data = wire_bytes(Tensor("U", arr)._to_wire()[3])
    assert data == serialize_reference([s.encode() for s in arr.tolist()])
    be = arr.astype(arr.dtype.newbyteorder(">"))
    assert wire_bytes(Tensor("U", be)._to_wire()[3]) == data


@pytest.mark.parametrize("kind", ["object", "S", "U"])
def test_bytes_non_contiguous(kind):
    words = [f"w{i}" * (i % 3) for i in range(12)]
    arr = np.array(words, dtype=object if kind == "object" else kind).reshape(3, 4)
    for view in (arr[:, ::2], arr.T, arr[::-1]):
        t = Tensor("NC", view)
        assert t.as_numpy() is view
        _, _, dims, buf = t._to_wire()
        assert dims == view.shape
        flat = [w.encode() if isinstance(w, str) else w for w in np.ravel(view).tolist()]
        assert wire_bytes(buf) == serialize_reference(flat)
        assert (
            roundtrip(t).as_numpy().tolist()
            == np.array(flat, dtype=object).reshape(view.shape).tolist()
        )


def test_bytes_subclasses_and_bytearray():
    arr = np.array([np.bytes_(b"nb"), np.str_("ns"), bytearray(b"ba")], dtype=object)
    assert wire_bytes(Tensor("X", arr)._to_wire()[3]) == serialize_reference([b"nb", b"ns", b"ba"])


def test_bytes_zero_size_and_scalar():
    t = roundtrip(Tensor("E", np.zeros((2, 0), dtype=object)))
    assert t.as_numpy().shape == (2, 0) and t.as_numpy().dtype == object
    s = Tensor("S", np.array("only", dtype=object))
    assert s.shape() == []
    assert wire_bytes(s._to_wire()[3]) == serialize_reference([b"only"])
    back = roundtrip(s).as_numpy()
    assert back.shape == () and back[()] == b"only"


def test_bytes_large_elements_and_many():
    big = b"\xff" * 70000
    arr = np.array([big, b"", b"x"] * 1000, dtype=object)
    out = roundtrip(Tensor("B", arr)).as_numpy()
    assert out.shape == (3000,) and out[0] == big and out[-1] == b"x"


@pytest.mark.parametrize(
    "bad", [1, None, 2.5, ["list"], object()], ids=["int", "None", "float", "list", "object"]
)
def test_bytes_unsupported_elements(bad):
    arr = np.empty(3, dtype=object)
    arr[:] = [b"ok", bad, "ok"]
    t = Tensor("OUT0", arr)  # content is checked when serialized
    with pytest.raises(TritonModelException, match="'OUT0'.*element 1 has type"):
        t._to_wire()


def test_bytes_unencodable_str():
    with pytest.raises(TritonModelException, match="'OUT0'.*element 1"):
        Tensor("OUT0", np.array(["a", "\ud800"], dtype=object))._to_wire()
    with pytest.raises(TritonModelException, match="'OUT0'.*U\\+D800"):
        Tensor("OUT0", np.array(["a", "\ud800"]))._to_wire()


def test_bytes_wire_pass_through_until_touched():
    raw = bytearray(serialize_reference([b"a", b"bb"]))
    t = Tensor._from_wire("S", 13, (2,), memoryview(raw))
    assert t._to_wire()[3].obj is raw  # not decoded, not re-encoded
    arr = t.as_numpy()
    assert arr.tolist() == [b"a", b"bb"]
    arr[1] = b"changed"  # object arrays are mutable: the wire form follows
    assert wire_bytes(t._to_wire()[3]) == serialize_reference([b"a", b"changed"])


MALFORMED = [
    (b"\x01\x00\x00", (1,), "truncated length prefix at byte 0"),
    (b"\x01\x00\x00\x00a\x02\x00", (2,), "truncated length prefix at byte 5"),
    (b"\x05\x00\x00\x00ab", (1,), "claims 5 bytes but only 2 remain"),
    (b"\xff\xff\xff\xff", (1,), "claims 4294967295 bytes"),
    (b"\x01\x00\x00\x00a", (2,), "holds 1 element"),
    (b"", (1,), "holds 0 element"),
    (b"\x01\x00\x00\x00a\x00\x00\x00\x00", (1,), "1 trailing|4 trailing"),
]


@pytest.mark.parametrize("data,dims,message", MALFORMED)
def test_malformed_bytes_wire(data, dims, message):
    t = Tensor._from_wire("IN9", 13, dims, memoryview(bytearray(data)))
    with pytest.raises(TritonModelException, match="'IN9'.*malformed BYTES"):
        t.as_numpy()
    with pytest.raises(TritonModelException, match=message):
        Tensor._from_wire("IN9", 13, dims, memoryview(bytearray(data))).as_numpy()


def test_malformed_fuzz_never_crashes():
    rng = np.random.default_rng(0)
    good = serialize_reference([b"abc", b"", b"de" * 10, b"f"])
    for _ in range(2000):
        data = bytearray(good)
        cut = int(rng.integers(0, len(data) + 1))
        data = data[:cut]
        if data and rng.random() < 0.5:
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        for count in (4, -1):
            try:
                if count < 0:
                    pb.deserialize_bytes_tensor(bytes(data))
                else:
                    Tensor._from_wire("F", 13, (count,), memoryview(data)).as_numpy()
            except TritonModelException:
                pass


# ------------------------------------------------------------------ public BYTES helpers


def test_serialize_byte_tensor_matches_official_results():
    assert pb.serialize_byte_tensor(np.array([], dtype=object)) == ()
    assert pb.serialize_byte_tensor(np.zeros(3, dtype=np.float32)) is None
    arr = np.array([b"ab", "c\u00e9", 7, None, 1.5], dtype=object)
    # Non bytes/str elements are written as str(element), as officially.
    assert pb.serialize_byte_tensor(arr) == serialize_reference(
        [b"ab", "c\u00e9".encode(), b"7", b"None", b"1.5"]
    )
    out = pb.serialize_byte_tensor(np.array([[b"a", b"b"], [b"c", b""]], dtype=object).T)
    assert out == serialize_reference([b"a", b"c", b"b", b""])  # C order of the view
    assert isinstance(out, bytes)


def test_deserialize_bytes_tensor():
    data = serialize_reference([b"a", b"", b"\x00\xff"])
    for src in (data, bytearray(data), memoryview(data), np.frombuffer(data, dtype=np.uint8)):
        out = pb.deserialize_bytes_tensor(src)
        assert out.dtype == object and out.shape == (3,)
        assert out.tolist() == [b"a", b"", b"\x00\xff"]
    assert pb.deserialize_bytes_tensor(b"").shape == (0,)
    with pytest.raises(TritonModelException, match="truncated"):
        pb.deserialize_bytes_tensor(b"\x01\x00")


# ------------------------------------------------------------------ BF16 without dlpack


def test_bf16_as_numpy_refuses():
    raw = bytearray(np.array([0x3F80, 0x4000], dtype="<u2").tobytes())  # 1.0, 2.0
    t = Tensor._from_wire("H", 14, (2,), memoryview(raw))
    assert t.triton_dtype() == 14 and t.shape() == [2]
    with pytest.raises(TritonModelException, match="BF16.*to_dlpack"):
        t.as_numpy()
    assert wire_bytes(t._to_wire()[3]) == bytes(raw)
    with pytest.raises(TritonModelException, match="'H'.*needs 4 bytes"):
        Tensor._from_wire("H", 14, (2,), memoryview(bytearray(3)))


# ------------------------------------------------------------------ errors


def test_triton_error():
    e = pb.TritonError("boom")
    assert e.message() == "boom" and str(e) == "boom"
    assert e.code() == pb.TritonError.INTERNAL == 1
    codes = dict(
        UNKNOWN=0,
        INTERNAL=1,
        NOT_FOUND=2,
        INVALID_ARG=3,
        UNAVAILABLE=4,
        UNSUPPORTED=5,
        ALREADY_EXISTS=6,
        CANCELLED=7,
    )
    for name, value in codes.items():
        assert getattr(pb.TritonError, name) == value
        assert pb.TritonError("m", getattr(pb.TritonError, name)).code() == value
        assert pb.TritonError("m", code=value).code() == value
    assert not isinstance(e, BaseException)
    with pytest.raises(TypeError):
        pb.TritonError("m", 99)
    with pytest.raises(TypeError):
        pb.TritonError(None)


def test_triton_model_exception():
    exc = TritonModelException("bad input")
    assert isinstance(exc, Exception)
    assert exc.message() == "bad input" and str(exc) == "bad input"
    with pytest.raises(TritonModelException):
        raise exc


# ------------------------------------------------------------------ requests


def make_stub_request(**over):
    args = dict(
        model_name="m",
        request_id="r1",
        correlation_id=7,
        flags=1,
        timeout=100,
        parameters='{"k": 1}',
        requested_output_names=["OUT0", "OUT1"],
        inputs=[
            Tensor("IN0", np.zeros(2, np.float32)),
            Tensor("IN1", np.array([b"x"], dtype=object)),
        ],
    )
    args.update(over)
    return request_from_stub(**args)


def test_request_from_stub_accessors():
    req = make_stub_request()
    assert [t.name() for t in req.inputs()] == ["IN0", "IN1"]
    assert req.request_id() == "r1"
    assert req.correlation_id() == 7
    assert req.flags() == 1
    assert req.timeout() == 100
    assert json.loads(req.parameters()) == {"k": 1}
    assert req.requested_output_names() == {"OUT0", "OUT1"}
    assert req.is_cancelled() is False
    assert req.trace().get_context() is None
    req.set_release_flags(pb.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
    assert req._release_flags == 2
    with pytest.raises(TritonModelException, match="has no response sender"):
        req.get_response_sender()
    assert make_stub_request(parameters="").parameters() == "{}"
    assert make_stub_request(correlation_id="seq-1").correlation_id() == "seq-1"


def test_request_lookup():
    req = make_stub_request()
    assert pb.get_input_tensor_by_name(req, "IN1") is req.inputs()[1]
    assert pb.get_input_tensor_by_name(req, "nope") is None


def test_bls_request_constructor():
    t = Tensor("IN0", np.zeros(2, np.float32))
    req = pb.InferenceRequest(model_name="add_sub", inputs=[t], requested_output_names=["OUT0"])
    assert req.request_id() == "" and req.correlation_id() == 0
    assert req.flags() == 0 and req.timeout() == 0
    assert req.parameters() == "{}"
    assert req.inputs() == [t] and req.requested_output_names() == {"OUT0"}
    req = pb.InferenceRequest(
        "id",
        "corr",
        [t],
        ["OUT0"],
        "add_sub",
        2,
        0,
        5,
        preferred_memory=pb.PreferredMemory(pb.TRITONSERVER_MEMORY_CPU, 0),
        trace=pb.InferenceTrace(),
        parameters={"a": True, "b": 3, "c": "x"},
    )
    assert req.request_id() == "id" and req.correlation_id() == "corr"
    assert req.timeout() == 5
    assert json.loads(req.parameters()) == {"a": True, "b": 3, "c": "x"}
    # Outside a stub there is no server to call.
    with pytest.raises(TritonModelException, match="running tritonpy stub"):
        req.exec()
    with pytest.raises(TritonModelException, match="running tritonpy stub"):
        asyncio.run(req.async_exec())


def test_bls_request_checked_in_c_and_in_python_alike():
    """Plain arguments (what BLS code passes) are checked and filled in C
    (_core.init_request with plain=True); the same request given with tuples and
    numpy scalars goes through the Python checks: the same fields."""
    t = Tensor("IN0", np.zeros(2, np.float32))
    names, inputs = ["OUT0"], [t]
    plain = pb.InferenceRequest("id", 7, inputs, names, "m", 2, 1, 5)
    general = pb.InferenceRequest(
        np.str_("id"), 7, (t,), ("OUT0",), np.str_("m"), np.int64(2), np.uint32(1), np.int32(5)
    )
    names.append("OUT1")  # the request keeps its own lists
    inputs.append(t)
    for r in (plain, general):
        assert (r.request_id(), r.correlation_id(), r.flags(), r.timeout()) == ("id", 7, 1, 5)
        assert (r._model_name, r._model_version, r.parameters()) == ("m", 2, "{}")
        assert r.inputs() == [t] and r.requested_output_names() == {"OUT0"}
        assert r._preferred_memory is plain._preferred_memory and r.trace() is plain.trace()
    with pytest.raises(TypeError, match="model_version"):
        pb.InferenceRequest("id", 7, [t], ["OUT0"], "m", 2**63)


def test_bls_request_constructor_errors():
    t = Tensor("IN0", np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="model_name"):
        pb.InferenceRequest(inputs=[t], requested_output_names=[])
    with pytest.raises(TritonModelException, match="Correlation ID must be integer or string"):
        pb.InferenceRequest(
            model_name="m", inputs=[t], requested_output_names=[], correlation_id=1.5
        )
    # A list holding a non-Tensor: TritonModelException, as officially.
    with pytest.raises(TritonModelException, match="Tensor"):
        pb.InferenceRequest(model_name="m", inputs=[np.zeros(1)], requested_output_names=[])
    with pytest.raises(TritonModelException, match="Tensor"):
        pb.InferenceRequest(model_name="m", inputs=[None], requested_output_names=[])


@pytest.mark.parametrize(
    "argument",
    [
        {"correlation_id": None},
        {"request_id": None},
        {"model_version": None},
        {"flags": None},
        {"timeout": None},
        {"preferred_memory": None},
        {"trace": None},
        {"model_version": 1.5},
        {"flags": -1},
        {"flags": 2**32},
        {"timeout": "10"},
        {"requested_output_names": None},
        {"requested_output_names": [None]},
        {"inputs": None},
        {"model_name": None},
    ],
)
def test_bls_request_arguments_the_official_binding_refuses_with_type_error(argument):
    """None for any argument but parameters, and integers that do not fit
    their C type: TypeError, as pybind11 raises for the official binding."""
    kwargs = {"model_name": "m", "inputs": [], "requested_output_names": [], **argument}
    with pytest.raises(TypeError):
        pb.InferenceRequest(**kwargs)


def test_bls_request_integer_arguments_take_numpy_integers():
    r = pb.InferenceRequest(
        model_name="m",
        inputs=[],
        requested_output_names=[],
        model_version=np.int64(3),
        flags=np.uint32(1),
        timeout=np.int32(5),
    )
    assert (r.flags(), r.timeout()) == (1, 5)


@pytest.mark.parametrize("method", ["log_info", "log_warn", "log_error", "log_verbose"])
def test_a_log_message_that_is_not_text_is_a_type_error_at_any_level(method):
    # log_verbose too, though verbose lines are off outside a stub.
    with pytest.raises(TypeError):
        getattr(pb.Logger, method)(None)


@pytest.mark.parametrize(
    "params,message",
    [
        ([], "Expect dict, got <class 'list'>"),
        ({1: "int key"}, "Expect parameters keys to have type str, found type <class 'int'>"),
        (
            {"f": 0.5},
            "Expect parameters values to have type bool/int/str, found type <class 'float'>",
        ),
        ({"n": None}, "found type <class 'NoneType'>"),
        ({"l": ["v"]}, "found type <class 'list'>"),
    ],
)
def test_parameters_validation(params, message):
    with pytest.raises(TritonModelException, match=message.replace("(", r"\(").replace(")", r"\)")):
        pb.InferenceResponse(parameters=params)
    with pytest.raises(TritonModelException):
        pb.InferenceRequest(model_name="m", inputs=[], requested_output_names=[], parameters=params)


# ------------------------------------------------------------------ responses


def test_response():
    out = Tensor("OUT0", np.ones(3, np.int32))
    resp = pb.InferenceResponse([out])
    assert resp.output_tensors() == [out]
    assert not resp.has_error() and resp.error() is None
    assert resp._parameters_json() == "" and resp.parameters() == "{}"
    assert pb.get_output_tensor_by_name(resp, "OUT0") is out
    assert pb.get_output_tensor_by_name(resp, "OUT1") is None

    empty = pb.InferenceResponse()
    assert empty.output_tensors() == [] and not empty.has_error()
    with pytest.raises(TypeError):  # left out is fine, None is not (as officially)
        pb.InferenceResponse(output_tensors=None)

    err = pb.TritonError("nope", pb.TritonError.INVALID_ARG)
    failed = pb.InferenceResponse(output_tensors=[], error=err)
    assert failed.has_error() and failed.error() is err
    assert failed.error().code() == 3

    with_params = pb.InferenceResponse([out], parameters={"p": 1, "q": "s", "r": False})
    assert json.loads(with_params._parameters_json()) == {"p": 1, "q": "s", "r": False}
    assert pb.InferenceResponse([out], parameters={})._parameters_json() == ""


def test_response_type_errors():
    out = Tensor("OUT0", np.ones(3, np.int32))
    with pytest.raises(TypeError):
        pb.InferenceResponse(out)
    with pytest.raises(TritonModelException):
        pb.InferenceResponse([np.ones(3)])
    with pytest.raises(TritonModelException):
        pb.InferenceResponse(output_tensors=[None])
    with pytest.raises(TypeError):
        pb.InferenceResponse([out], error="message")


# ------------------------------------------------------------------ config lookups

CONFIG = {
    "name": "m",
    "input": [
        {"name": "IN0", "data_type": "TYPE_FP32", "dims": ["4"]},
        {"name": "IN1", "data_type": "TYPE_STRING", "dims": ["-1"]},
    ],
    "output": [{"name": "OUT0", "data_type": "TYPE_INT32", "dims": ["4"]}],
}


def test_config_lookups():
    assert pb.get_input_config_by_name(CONFIG, "IN1") is CONFIG["input"][1]
    assert pb.get_input_config_by_name(CONFIG, "OUT0") is None
    assert pb.get_output_config_by_name(CONFIG, "OUT0") is CONFIG["output"][0]
    assert pb.get_output_config_by_name(CONFIG, "IN0") is None
    assert pb.get_input_config_by_name({}, "IN0") is None
    assert pb.get_output_config_by_name({"output": []}, "OUT0") is None
    cfg_type = pb.get_output_config_by_name(CONFIG, "OUT0")["data_type"]
    assert pb.triton_string_to_numpy(cfg_type) is np.int32


def test_decoupled_policy():
    assert pb.using_decoupled_model_transaction_policy(CONFIG) is False
    cfg = dict(CONFIG, model_transaction_policy={"decoupled": True})
    assert pb.using_decoupled_model_transaction_policy(cfg) is True


def test_metrics_api_names_and_errors_outside_a_stub():
    assert (pb.MetricFamily.COUNTER, pb.MetricFamily.GAUGE, pb.MetricFamily.HISTOGRAM) == (0, 1, 2)
    # tritonserver 2.51's module has no other metric names: models using
    # them would not run there.
    assert not {"Metric", "MetricKind", "COUNTER", "GAUGE", "HISTOGRAM"} & set(dir(pb))
    with pytest.raises(TritonModelException, match="running tritonpy stub"):
        pb.MetricFamily("requests_total", "requests", pb.MetricFamily.COUNTER)
    with pytest.raises(TritonModelException, match="kind must be"):
        pb.MetricFamily("requests_total", "requests", 9)
    with pytest.raises(TritonModelException, match="name must be"):
        pb.MetricFamily("", "requests", pb.MetricFamily.COUNTER)
    with pytest.raises(TypeError, match="MetricFamily.Metric"):
        pb._metrics.Metric()


def test_logger_levels_as_the_official_api():
    assert pb.Logger.INFO == pb.LogLevel.INFO == 0
    assert pb.Logger.WARNING == 1 and pb.Logger.ERROR == 2 and pb.Logger.VERBOSE == 3
    assert pb.Logger.LogLevel is pb.LogLevel
    # A level is a LogLevel, not a bare int or None (upstream argument_validation).
    for level in (1, None):
        with pytest.raises(TypeError, match="LogLevel"):
            pb.Logger.log("message", level)


def test_tensor_empty_outside_a_stub_is_an_ordinary_writable_array() -> None:
    t = Tensor.empty("OUT", (2, 3), np.int16)
    a = t.as_numpy()
    assert a.shape == (2, 3) and a.dtype == np.int16 and a.flags.writeable
    a[:] = 5
    assert t.name() == "OUT" and t.triton_dtype() == 7 and t.shape() == [2, 3]
    assert (Tensor.empty("Z", [0], "float32").as_numpy().shape) == (0,)


@pytest.mark.parametrize(
    ("shape", "dtype", "needle"),
    [
        ([2], np.object_, "fixed-size dtype"),
        ([2], "S4", "fixed-size dtype"),
        ([2, -1], np.float32, "negative dimension"),
        (["x"], np.float32, "cannot be interpreted as an integer"),
        ([2.5], np.float32, "cannot be interpreted as an integer"),
        ([2], "not-a-dtype", "not understood"),
    ],
)
def test_tensor_empty_names_the_tensor_in_its_errors(shape, dtype, needle: str) -> None:
    with pytest.raises(TritonModelException, match=needle) as e:
        Tensor.empty("OUT", shape, dtype)
    assert "'OUT'" in str(e.value)


def test_tensor_empty_uses_the_stubs_shared_memory_above_64_kib(monkeypatch) -> None:
    """In a stub (a host attached), large arrays come from the host's
    arenas, small ones from ordinary memory (they are copied into the frame)."""
    import types

    from tritonpy.pb_utils import _host

    given = []

    def block(n: int) -> bytearray:
        given.append(bytearray(n))
        return given[-1]

    monkeypatch.setattr(
        _host, "_host", types.SimpleNamespace(arenas=types.SimpleNamespace(block=block))
    )
    small = Tensor.empty("S", [16384], np.float32).as_numpy()  # exactly 64 KiB
    big = Tensor.empty("B", [128, 129], np.float32).as_numpy()
    assert len(given) == 1 and len(given[0]) == big.nbytes
    big[:] = 2
    assert bytes(given[0]) == np.full(128 * 129, 2, np.float32).tobytes()
    assert small.nbytes == 65536 and small.flags.writeable
