# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The seam between pb_utils and the stub (pb_utils/_host.py): one host,
attached once; every part of pb_utils that needs a server asks it, and
outside a stub the same calls fail as before. Each case runs in a fresh
interpreter, since attaching is for the life of the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap


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
        from tritonpy.pb_utils import _c_utils, _host

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
        _host.attach(host)
        pb.Logger.log_info("hello")
        pb.Logger.log_warn("not enabled")
        pb.Logger.log_verbose("verbose")
        print(pb.is_model_ready("m"), pb.get_model_dir(), _c_utils.shared_memory.free_memory())
        pb.Tensor.empty("T", [1 << 16], "float32")
        try:
            _host.attach(host)
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
    from tritonpy.pb_utils._core import close
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
    """The stub's Python modules reach pb_utils through its public API,
    the host (_host.py) and the functions _core.pyx keeps for the stub;
    only the compiled modules read fields, declared in _core.pxd."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    private: set[str] = set()
    for f in (root / "src" / "tritonpy" / "pb_utils").glob("*.p*"):
        text = f.read_text()
        private |= set(re.findall(r"cdef public \w+ (_\w+)", text))
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
