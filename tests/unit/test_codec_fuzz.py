# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Property tests of the stub's frame decoder: whatever the bytes, it either
decodes or raises ProtocolError/UnicodeDecodeError; it never crashes, hangs
or reads outside the message (the C++ side has its own fuzzing in
backend/tests).

Each message is decoded where it ends right before a page that cannot be
read, so that an over-read is a crash, not a quiet read of the next bytes.
The same tests run once more against a copy of the codec built with ASan
(test_the_codec_tests_pass_under_asan): a read or write outside any heap
block fails them too.

The examples come from the suite's fixed fuzz seed (tests/fuzz_seed.py,
printed in pytest's header); Hypothesis prints a failing example."""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import mmap
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import protocol_ref as P
from fuzz_seed import SEED

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
# Set in the run under ASan: the codec to test instead of the installed one.
CODEC_SO = os.environ.get("TRITONPY_TEST_CODEC_SO")


def _codec() -> ModuleType:
    if not CODEC_SO:
        from tritonpy.stub import _codec

        return _codec
    spec = importlib.util.spec_from_file_location("tritonpy.stub._codec", CODEC_SO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


C = _codec()
FRAMES = [
    (GOLDEN / e["file"]).read_bytes()
    for e in json.loads((GOLDEN / "frames.json").read_text())
    if not e.get("invalid")
]


class GuardedBuffer:
    """Puts a message at the very end of readable memory: the page after it
    is PROT_NONE, so reading one byte past it is a SIGSEGV."""

    PAGE = mmap.PAGESIZE

    def __init__(self, max_size: int) -> None:
        self.size = (max_size + self.PAGE - 1) // self.PAGE * self.PAGE
        self.mem = mmap.mmap(-1, self.size + self.PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        if libc.mprotect(base + self.size, self.PAGE, 0) != 0:  # PROT_NONE
            raise OSError(ctypes.get_errno(), "mprotect")
        self.view = memoryview(self.mem)

    def place(self, data: bytes) -> memoryview:
        start = self.size - len(data)
        self.view[start : self.size] = data
        return self.view[start : self.size]


GUARD = GuardedBuffer(P.MAX_FRAME)


def decode(data: bytes) -> None:
    buf = GUARD.place(data)
    try:
        ftype, flags, _fid, _n = C.decode_header(buf)
        if flags & C.FLAG_BODY_IN_ARENA:
            C.decode_arena_ref(buf)
        else:
            C.decode_body(ftype, buf)
    except (C.ProtocolError, UnicodeDecodeError):
        pass
    finally:
        buf.release()


@seed(SEED)
@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes(data: bytes) -> None:
    decode(data)


@seed(SEED)
@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_mutated_golden_frames(data: st.DataObject) -> None:
    frame = bytearray(data.draw(st.sampled_from(FRAMES)))
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()) and len(frame) > P.HEADER_SIZE:
        del frame[data.draw(st.integers(P.HEADER_SIZE, len(frame))) :]  # cut short
    if data.draw(st.booleans()) and len(frame) >= P.HEADER_SIZE:
        # Keep the header's body_len consistent so the body parser is exercised.
        struct.pack_into("<I", frame, 16, len(frame) - P.HEADER_SIZE)
        frame[0:4] = struct.pack("<I", P.MAGIC)
        frame[4] = P.VERSION
    decode(bytes(frame))


@seed(SEED)
@settings(max_examples=1000, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_huge_counts_and_lengths_are_refused_quickly(count: int, length: int) -> None:
    body = struct.pack("<II", count, length)
    for ftype in (C.EXECUTE, C.RESPONSES, C.RELEASE, C.CANCEL, C.METRIC):
        frame = P.HEADER.pack(P.MAGIC, P.VERSION, ftype, 0, 0, len(body), 0) + body
        decode(frame)


@pytest.mark.skipif(CODEC_SO is not None, reason="about the guard, not the codec")
def test_a_read_past_the_message_is_a_crash() -> None:
    """The guard works: reading the byte after a placed message faults."""
    code = (
        "import sys; sys.path[:0] = sys.argv[1:]\n"
        "import ctypes, test_codec_fuzz as t\n"
        "buf = t.GUARD.place(b'x' * 10)\n"
        "addr = ctypes.addressof(ctypes.c_char.from_buffer(t.GUARD.mem)) + t.GUARD.size\n"
        "print(ctypes.string_at(addr - 10, 10)); sys.stdout.flush()\n"
        "ctypes.string_at(addr, 1)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent), str(ROOT / "tests")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "xxxxxxxxxx" in out.stdout, out.stderr
    assert out.returncode == -11, (out.returncode, out.stderr[-2000:])  # SIGSEGV


# ---- the same tests against a build of the codec with ASan -----------------


def _asan_runtime() -> Path | None:
    cc = sysconfig.get_config_var("CC").split()[0]
    if shutil.which(cc) is None:
        return None
    out = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True)
    path = Path(out.stdout.strip())
    return path if out.returncode == 0 and path.is_absolute() and path.exists() else None


def _build_asan_codec() -> Path:
    """stub/_codec.pyx compiled with -fsanitize=address into build/asan-codec
    (kept: rebuilt when the sources change)."""
    sources = [
        ROOT / "src" / "tritonpy" / "stub" / n for n in ("_codec.pyx", "_decode.pxi", "_codec.pxd")
    ]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    out_dir = ROOT / "build" / "asan-codec" / digest
    so = out_dir / ("_codec" + sysconfig.get_config_var("EXT_SUFFIX"))
    if so.exists():
        return so
    tmp = out_dir.with_name(digest + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    c_file = tmp / "_codec.c"
    cython = Path(sys.executable).with_name("cython")
    subprocess.run(
        [
            str(cython) if cython.exists() else "cython",
            "-3",
            "--module-name",
            "tritonpy.stub._codec",
            "-o",
            str(c_file),
            str(sources[0]),
        ],
        check=True,
        capture_output=True,
    )
    cc = sysconfig.get_config_var("CC").split()[0]
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-fsanitize=address",
            f"-I{sysconfig.get_paths()['include']}",
            str(c_file),
            "-o",
            str(tmp / so.name),
        ],
        check=True,
        capture_output=True,
    )
    tmp.rename(out_dir)
    return so


@pytest.mark.skipif(CODEC_SO is not None, reason="already the run under ASan")
@pytest.mark.parametrize("seed_", [SEED])
def test_the_codec_tests_pass_under_asan(seed_: int) -> None:
    runtime = _asan_runtime()
    if runtime is None:
        pytest.skip("no ASan runtime for the C compiler")
    so = _build_asan_codec()
    assert b"__asan_report_load" in so.read_bytes(), f"{so} is not instrumented"
    env = dict(
        os.environ,
        TRITONPY_TEST_CODEC_SO=str(so),
        TRITONPY_FUZZ_SEED=str(seed_),
        LD_PRELOAD=str(runtime),
        # Python's own allocator hides small blocks from ASan.
        PYTHONMALLOC="malloc",
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__]
    out = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env=env, cwd=str(ROOT)
    )
    report = [line for line in out.stderr.splitlines() if "Sanitizer" in line]
    assert out.returncode == 0, (
        f"seed {seed_}; replay: TRITONPY_TEST_CODEC_SO={so} LD_PRELOAD={runtime} "
        f"PYTHONMALLOC=malloc TRITONPY_FUZZ_SEED={seed_} {' '.join(command)}\n"
        + "\n".join(report[:5])
        + f"\n{out.stdout[-4000:]}{out.stderr[-4000:]}"
    )
    assert "passed" in out.stdout and "failed" not in out.stdout, out.stdout[-2000:]
