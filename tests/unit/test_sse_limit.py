# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""bench/sse_load.py's time limit on one stream, both ways it is kept
(asyncio.timeout from Python 3.11 on, asyncio.wait_for on 3.10): a stream
the server never answers ends as an error when the limit passes, a
refused connection is an error naming the refusal, a caller's cancel is
not taken for the limit, and mypy (Python 3.10, pyproject's settings)
finds nothing in the file."""

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bench import sse_load

ROOT = Path(__file__).resolve().parents[2]
PATH = "/v2/models/m/generate_stream"


@pytest.fixture(params=["within", "within_task"])
def limit_kept_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sse_load, "within", getattr(sse_load, request.param))
    return str(request.param)


@asynccontextmanager
async def silent_server(asked: asyncio.Event, gone: asyncio.Event) -> AsyncIterator[str]:
    """A server that reads a request and never answers; ``asked`` is set
    when it has the request, ``gone`` when the client closed."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        asked.set()
        await reader.read()  # b"" when the client closes
        gone.set()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


def test_a_stream_never_answered_ends_at_the_limit(limit_kept_by: str) -> None:
    async def go() -> tuple[sse_load.Stream, float, bool]:
        asked, gone = asyncio.Event(), asyncio.Event()
        async with silent_server(asked, gone) as target:
            t0 = time.monotonic()
            s = await sse_load.read_stream(target, PATH, {"N": 3}, limit=1.0)
            took = time.monotonic() - t0
            await asyncio.wait_for(gone.wait(), 30)  # the connection is closed
            return s, took, asked.is_set()

    s, took, asked = asyncio.run(go())
    assert asked
    assert s.error == "still open after 1 s", s
    assert not s.ended and s.status is None and s.events == []
    assert 1.0 <= took < 30, took


def test_a_refused_connection_is_an_error_naming_it(limit_kept_by: str) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = asyncio.run(sse_load.read_stream(f"127.0.0.1:{port}", PATH, {"N": 3}, limit=30))
    assert s.error is not None and s.error.startswith("connection failed: ConnectionRefused"), s
    assert not s.ended


def test_a_cancel_by_the_caller_is_not_the_limit(limit_kept_by: str) -> None:
    async def go() -> tuple[sse_load.Stream, bool]:
        asked, gone = asyncio.Event(), asyncio.Event()
        out = sse_load.Stream()
        async with silent_server(asked, gone) as target:
            task = asyncio.create_task(sse_load.read_stream(target, PATH, {"N": 3}, 60, out))
            await asyncio.wait_for(asked.wait(), 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.wait_for(gone.wait(), 30)  # and the connection closed
            return out, task.cancelled()

    out, cancelled = asyncio.run(go())
    assert cancelled
    assert out.error is None and not out.ended


def test_mypy_finds_nothing_in_sse_load() -> None:
    exe = shutil.which("mypy", path=str(Path(sys.executable).parent))
    assert exe is not None, "mypy is installed by `make setup`"
    cmd = [exe, "--config-file", "pyproject.toml", "--cache-dir", ".mypy_cache"]
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    out = subprocess.run(
        [*cmd, "bench/sse_load.py"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert out.returncode in (0, 1) and out.stderr == "", out.stderr  # it ran
    mine = [line for line in out.stdout.splitlines() if line.startswith("bench/sse_load.py")]
    assert mine == [], out.stdout
    assert 'python_version = "3.10"' in (ROOT / "pyproject.toml").read_text()
