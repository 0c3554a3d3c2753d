# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The seam between pb_utils and the stub (pb_utils/_seam.pyx): the one
module of pb_utils the stub imports; one host, registered once through it,
that every part of pb_utils needing a server asks (pb_utils/_host.py),
while outside a stub the same calls fail as before; and request, response
and tensor fields that model code can read but not assign. The host cases
run in a fresh interpreter, since registering is for the life of the
process."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
PB_UTILS = ROOT / "src" / "tritonpy" / "pb_utils"
STUB = ROOT / "src" / "tritonpy" / "stub"
SEAM = "tritonpy.pb_utils._seam"
# The names pb_utils is also imported as (in a stub, sys.modules maps them).
PB_UTILS_ALIASES = ("tritonpy.pb_utils", "triton_python_backend_utils", "c_python_backend_utils")


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_outside_a_stub_the_calls_that_need_one_say_so() -> None:
    out = _run(
        """
        from tritonpy import pb_utils as pb
        from tritonpy.pb_utils import _c_utils

        for call in (
            lambda: pb.load_model("m"),
            lambda: pb.is_model_ready("m"),
            lambda: pb.MetricFamily("f", "d", pb.MetricFamily.COUNTER),
            pb.get_model_dir,
        ):
            try:
                call()
            except pb.TritonModelException as e:
                print(e.message())
        print(_c_utils.shared_memory.free_memory())
        print(pb.Tensor.empty("T", [1 << 16], "float32").as_numpy().nbytes)
        """
    )
    assert out.splitlines() == [
        "BLS and the model loading API need a running tritonpy stub",
        "BLS and the model loading API need a running tritonpy stub",
        "custom metrics need a running tritonpy stub",
        "pb_utils.get_model_dir() answers only in a model served by a tritonpy stub",
        "0",
        str(4 << 16),
    ]


def test_an_attached_host_serves_every_part_and_is_attached_once() -> None:
    out = _run(
        """
        import types
        from tritonpy import pb_utils as pb
        from tritonpy.pb_utils import _c_utils, _seam

        calls = []
        arenas = types.SimpleNamespace(
            block=lambda n: calls.append(("block", n)) or bytearray(n), free_bytes=123
        )
        bls = types.SimpleNamespace(
            model_control=lambda msg: calls.append(msg["op"]) or {"ok": True, "ready": True}
        )
        host = types.SimpleNamespace(
            responses=None,
            bls=bls,
            metrics=None,
            arenas=arenas,
            log_levels=0b1001,  # INFO and VERBOSE only
            log=lambda level, file, line, msg: calls.append((level, msg)),
            model_dir=lambda: "/models/m/1",
        )
        _seam.register(host)
        pb.Logger.log_info("hello")
        pb.Logger.log_warn("not enabled")
        pb.Logger.log_verbose("verbose")
        print(pb.is_model_ready("m"), pb.get_model_dir(), _c_utils.shared_memory.free_memory())
        pb.Tensor.empty("T", [1 << 16], "float32")
        try:
            _seam.register(host)
        except RuntimeError as e:
            print(e)
        print(calls)
        """
    )
    lines = out.splitlines()
    assert lines[0] == "True /models/m/1 123"
    assert lines[1] == "pb_utils is already attached to a stub"
    assert lines[2] == "[(0, 'hello'), (3, 'verbose'), 'is_ready', ('block', 262144)]"


def test_a_request_is_complete_in_one_place_and_its_batch_asks_it() -> None:
    from tritonpy.pb_utils._seam import close
    from tritonpy.stub._batch import Batch, request_from_stub

    batch = Batch()
    batch.requests = [
        request_from_stub("m", f"r{i}", 0, 0, 0, "", [], [], batch, i) for i in range(3)
    ]
    assert batch.open == 3
    assert close(batch.requests[1])
    assert not close(batch.requests[1])  # once only, whoever ends it
    assert batch.open == 2
    for req in batch.requests:
        close(req)
    assert batch.open == 0


def test_the_stubs_python_modules_touch_no_private_name_of_pb_utils() -> None:
    """The stub's Python modules reach pb_utils through the seam's names
    and functions; only the compiled modules read fields, declared in
    _core.pxd."""
    root = ROOT
    private: set[str] = set()
    for f in (root / "src" / "tritonpy" / "pb_utils").glob("*.p*"):
        text = f.read_text()
        private |= set(re.findall(r"cdef (?:public|readonly) \w+ (_\w+)", text))
        for slots in re.findall(r"__slots__ = \(([^)]*)\)", text):
            private |= set(re.findall(r"\"(_[a-z]\w*)\"", slots))
        private |= set(re.findall(r"^(_[a-z]\w*)\b[^=\n]*=", text, re.M))
        private |= set(re.findall(r"^    def (_[a-z]\w*)\(", text, re.M))
    found = []
    for f in sorted((root / "src" / "tritonpy" / "stub").glob("*.py")):
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if line.lstrip().startswith(("from ", "import ")):
                continue  # module paths: private modules, public names
            for m in re.finditer(r"(\w*)\.(_[a-z]\w*)\b", line.split("#")[0]):
                if m.group(1) != "self" and m.group(2) in private:
                    found.append(f"{f.name}:{n}: {m.group(0)}")
    assert not found, found


def _imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) for every module the import lines of a stub source
    name: ``import``, ``from ... import`` and Cython's ``cimport``, at any
    indentation, a parenthesized name list included. ``from P import n``
    names the module ``P.n`` where that is a module of src/, else ``P``;
    a relative import counts from tritonpy.stub."""
    found = []
    statement = re.compile(
        r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+c?import[ \t]+(\([^)]*\)|[^\n]*)"
        r"|c?import[ \t]+([^\n]*))",
        re.M,
    )
    for m in statement.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        if m.group(3) is not None:  # import a.b [as c], d
            for part in m.group(3).split("#")[0].split(","):
                if part.strip():
                    found.append((line, part.split()[0]))
            continue
        package = m.group(1)
        if package.startswith("."):
            dots = len(package) - len(package.lstrip("."))
            base = ["tritonpy", "stub"][: 2 - (dots - 1)]
            package = ".".join(base + [p for p in package.lstrip(".").split(".") if p])
        names = re.sub(r"#[^\n]*", "", m.group(2)).strip("()")
        for part in names.split(","):
            if not part.strip():
                continue
            module = f"{package}.{part.split()[0]}"
            path = ROOT / "src" / Path(*module.split("."))
            is_module = path.is_dir() or any(
                path.with_suffix(s).is_file() for s in (".py", ".pyx", ".pxd")
            )
            found.append((line, module if is_module else package))
    return found


def test_the_stub_imports_nothing_of_pb_utils_but_the_seam() -> None:
    """One module of pb_utils, _seam, is what the stub imports (Python
    imports and cimports alike), under any of pb_utils' names."""
    files = sorted(f for f in STUB.iterdir() if f.suffix in (".py", ".pyx", ".pxd", ".pxi", ".pyi"))
    through_seam, others = set(), []
    for f in files:
        for line, module in _imported_modules(f.read_text()):
            if module == SEAM or module.startswith(SEAM + "."):
                through_seam.add(f.name)
            elif any(module == a or module.startswith(a + ".") for a in PB_UTILS_ALIASES):
                others.append(f"stub/{f.name}:{line}: {module}")
    assert not others, "the stub imports pb_utils modules other than _seam:\n" + "\n".join(others)
    # The reader sees the stub's real imports (a pattern finding nothing
    # would pass the check above too).
    assert {"_engine.pyx", "bls.py", "main.py", "pb_host.py", "_batch.pyx"} <= through_seam


def test_the_import_reader_sees_every_way_of_naming_a_pb_utils_module() -> None:
    source = textwrap.dedent(
        """
        from tritonpy import pb_utils
        from tritonpy.pb_utils import _core as core, _seam
        from tritonpy.pb_utils._core cimport (
            RequestCore,  # a comment
            TensorCore,
        )
        from ..pb_utils import _errors
        if True:
            import tritonpy.pb_utils._tensor as t, json
            import triton_python_backend_utils
        from tritonpy.pb_utils._seam import pb_utils
        """
    )
    assert [m for _, m in _imported_modules(source)] == [
        "tritonpy.pb_utils",
        "tritonpy.pb_utils._core",
        SEAM,
        "tritonpy.pb_utils._core",
        "tritonpy.pb_utils._core",
        "tritonpy.pb_utils._errors",
        "tritonpy.pb_utils._tensor",
        "json",
        "triton_python_backend_utils",
        SEAM,
    ]


# ---------------------------------------------------------------- read-only fields


def _declared_fields() -> dict[str, list[str]]:
    """The fields _core.pxd declares, by class."""
    fields: dict[str, list[str]] = {}
    cls = ""
    for line in (PB_UTILS / "_core.pxd").read_text().splitlines():
        if m := re.match(r"cdef class (\w+)", line):
            cls = m.group(1)
            fields[cls] = []
        elif m := re.match(r"    cdef (?:public |readonly )?\w+ (_[a-z]\w*)", line):
            fields[cls].append(m.group(1))
    return fields


def test_model_code_cannot_assign_a_field_of_a_request_response_tensor_or_sender() -> None:
    from tritonpy import pb_utils as pb
    from tritonpy.stub._batch import Batch, request_from_stub

    fields = _declared_fields()
    # ResponsesCore is the stub engine's base: no field a model could reach.
    assert set(fields) == {
        "TensorCore",
        "RequestCore",
        "ResponseCore",
        "SenderCore",
        "ResponsesCore",
    }
    assert fields["ResponsesCore"] == []
    batch = Batch()
    given = request_from_stub("m", "r1", 0, 0, 0, "", [], [], batch, 0)
    objects = {
        "TensorCore": [
            pb.Tensor("T", np.zeros(2, np.float32)),  # the compiled fast path
            pb.Tensor("S", np.array([b"x"], dtype=object)),  # the Python path
            pb.Tensor._from_wire("W", 11, (1,), bytearray(4)),
        ],
        "RequestCore": [
            given,
            pb.InferenceRequest(inputs=[], requested_output_names=[], model_name="m"),
        ],
        "ResponseCore": [
            pb.InferenceResponse([pb.Tensor("T", np.zeros(1, np.float32))]),
            pb.InferenceResponse(error=pb.TritonError("no")),
        ],
        "SenderCore": [given.get_response_sender()],
        "ResponsesCore": [],
    }
    writable = []
    for cls, names in fields.items():
        for obj in objects[cls]:
            for name in names:
                before = getattr(obj, name)
                try:
                    setattr(obj, name, "overwritten")
                except AttributeError:
                    assert getattr(obj, name) is before
                else:
                    writable.append(f"{type(obj).__name__}.{name}")
    assert not writable, writable


def test_what_official_models_do_to_requests_and_tensors_still_works() -> None:
    """The official API's setters and every lazily kept field (the trace,
    the sender, cancel callbacks, a decoded array) go through the compiled
    writers, not through attribute assignment."""
    from tritonpy import pb_utils as pb
    from tritonpy.pb_utils import _seam
    from tritonpy.stub._batch import Batch, request_from_stub

    batch = Batch()
    batch.id = 5
    wire = pb.Tensor._from_wire("B", 13, (1,), bytearray(b"\x02\x00\x00\x00hi"))
    req = request_from_stub("m", "r1", 0, 0, 0, "", [], [wire], batch, 0, "ctx")
    req.set_flags(pb.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END)
    assert req.flags() == 2
    req.set_release_flags(pb.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
    assert _seam.rescheduled(req)
    assert req.trace() is req.trace() and req.trace().get_context() == "ctx"
    assert req.get_response_sender() is req.get_response_sender()
    seen: list[object] = []
    req.add_cancel_callback(seen.append)
    _seam.cancel(req)
    assert seen == [req] and req.is_cancelled()
    assert pb.get_input_tensor_by_name(req, "B").as_numpy().tolist() == [b"hi"]
    assert wire._array is not None  # decoded once, kept
    bls = pb.InferenceRequest(
        inputs=[wire], requested_output_names=["O"], model_name="n", flags=1, timeout=3
    )
    bls.set_flags(0)
    assert (bls.flags(), bls.timeout(), bls.inputs(), _seam.model_name(bls)) == (0, 3, [wire], "n")
    dl = pb.Tensor.from_dlpack("D", np.arange(3, dtype=np.int32))
    assert dl.as_numpy().tolist() == [0, 1, 2]
    copy = pb.Tensor.from_dlpack("C", dl.__dlpack__(copy=True))
    assert copy.as_numpy().tolist() == [0, 1, 2]
    resp = pb.InferenceResponse([dl], parameters={"k": 1})
    assert resp.parameters() == '{"k": 1}' and resp.output_tensors() == [dl]
