# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A real tritonserver, with tritonpy installed, on free local ports: the
harness of tritonpy._testbase with what the tests add (test models, the
official backend, examples' clients)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonpy import install as inst

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench/: the official backend's set-up
from tritonpy._testbase.server import Tritonserver, children, free_ports  # noqa: E402

__all__ = [
    "TritonServer",
    "alive",
    "build_repository",
    "children",
    "eventually",
    "free_ports",
    "running",
    "sample",
    "scrape",
    "wait_gone",
    "wait_until",
]

T = TypeVar("T")

MODELS = Path(__file__).resolve().parent / "models"
EXAMPLES = ROOT / "examples"


def build_repository(dest: Path, names: list[str]) -> Path:
    """Copy test models (tests/integration/models/<name>) and examples
    (examples/model_repository/<name>) into a fresh repository."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        src = MODELS / name
        if not src.is_dir():
            src = EXAMPLES / "model_repository" / name
        shutil.copytree(src, dest / name, symlinks=False)
    return dest


def official_server(work: Path, models: list[str], args: list[str] | None = None) -> TritonServer:
    """A tritonserver with the official Python backend of the nvidia-pytriton
    wheel (as the benchmarks run it) on a repository of ``models``, for
    differential tests."""
    from bench import environment

    backends, env = environment.official_backend_dir(work)
    return TritonServer(
        build_repository(work / "repo", models),
        work,
        args=args,
        backend_dir=backends,
        prefix=["env", *(f"{k}={v}" for k, v in env.items())],
    )


def explicit(names: list[str]) -> list[str]:
    """tritonserver arguments: load ``names`` at start, the others only when
    asked (the model control API)."""
    return ["--model-control-mode=explicit", *(f"--load-model={m}" for m in names)]


def run_example_client(example: str, *args: str, oks: int | None, timeout: float = 120) -> str:
    """Runs examples/<example>/client.py with ``args``; asserts it exits 0
    and prints ``oks`` lines ending in "ok" (None: a client that checks
    nothing itself, the caller reads the output) and none "WRONG". Returns
    its output."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / example / "client.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "WRONG" not in out.stdout, out.stdout
    assert oks is None or out.stdout.count(" ok") == oks, out.stdout
    return out.stdout


def load_failure(srv: TritonServer, model: str) -> str:
    """Asks ``srv`` to load ``model``, which must fail: returns Triton's
    error message, after checking the model is not ready."""
    c = httpclient.InferenceServerClient(srv.http_url)
    try:
        c.load_model(model)
    except InferenceServerException as e:
        message = str(e)
    else:
        raise AssertionError(f"loading {model} succeeded")
    finally:
        c.close()
    assert not srv.model_ready(model)
    return message


class TritonServer(Tritonserver):
    """A server for a test: ``workdir`` holds its log (and, unless
    ``backend_dir`` is given, the backends installed from this tritonpy)."""

    def __init__(
        self,
        repo: Path,
        workdir: Path,
        *,
        args: list[str] | None = None,
        backend_dir: Path | None = None,
        prefix: list[str] | None = None,
    ) -> None:
        verbose = os.environ.get("TRITONPY_TEST_LOG_VERBOSE", "0")
        super().__init__(
            repo,
            backend_dir or inst.backend_dir(workdir / "backends"),
            workdir,
            args=[f"--log-verbose={verbose}", *(args or [])],
            prefix=prefix,
        )

    @property
    def http_url(self) -> str:
        return f"localhost:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"localhost:{self.grpc_port}"

    def log_size(self) -> int:
        """Where the log ends now: ``wait_log(..., after=)`` then sees only
        what is written from here on."""
        return len(self.log())

    def wait_log(self, text: str, timeout: float = 30.0, after: int = 0) -> bool:
        """Whether ``text`` appears in the log (past offset ``after``)
        within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while text not in self.log()[after:]:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _get(self, path: str) -> int:
        # Generous: a loaded 2-core box can take seconds to answer.
        return self.request("GET", path, timeout=30)[0]

    def model_ready(self, name: str) -> bool:
        return self._get(f"/v2/models/{name}/ready") == 200

    def stop_after_cancelled_streams(self) -> None:
        """Stop, and fail unless the exit is clean. Known Triton 2.51 quirk:
        after a client cancels a gRPC stream mid-way the server sometimes
        keeps the model alive although every request was released, and
        exits 1 when its exit timeout runs out; that alone is tolerated."""
        code = self.stop()
        assert code == 0 or (code == 1 and "Exit timeout expired" in self.log()), self.log()[-3000:]


def scrape(srv: TritonServer) -> str:
    """The metrics page. Triton opens its metrics port a little after the
    HTTP endpoint reports ready: a refused connection is retried briefly."""
    deadline = time.monotonic() + 30
    while True:
        try:
            url = f"http://127.0.0.1:{srv.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=30) as r:
                return r.read().decode()
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
        except urllib.error.URLError as e:
            if not isinstance(e.reason, ConnectionRefusedError) or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the series ``name`` whose labels include ``labels``."""
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)\{(.*)\} (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


def eventually(check: Callable[[], T], timeout: float = 30.0) -> T:
    """``check()`` (which asserts) retried until it passes, for up to
    ``timeout`` seconds; then its last failure is raised. For a state that
    settles (a descriptor closed, memory given back) a while after the
    traffic that made it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def wait_until(predicate: Callable[[], object], timeout: float = 30.0) -> None:
    """Returns once ``predicate()`` is true, asked every 0.1 s; fails after
    ``timeout`` seconds. (`eventually` is for a check that asserts.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"condition not met within {timeout}s")


def wait_gone(pids: list[int] | set[int], timeout: float = 30.0) -> list[int]:
    """Waits up to ``timeout`` seconds for the processes ``pids`` to end;
    returns those still alive then (a reaped process is gone from /proc)."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an exited child
    not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def open_files(pid: int) -> list[str]:
    """What each descriptor of process ``pid`` points at (the links under
    /proc/pid/fd: a path, ``socket:[inode]``, ``/memfd:name`` ...); one
    closed while they are read is left out."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


@contextlib.contextmanager
def running(srv: TritonServer) -> Iterator[TritonServer]:
    """`srv` once it is ready; stopped afterwards, failing unless it exited
    with 0 (the end of its log is printed for the test report)."""
    try:
        srv.wait_ready()
        yield srv
    finally:
        code = srv.stop()
        print(srv.log()[-3000:])
        assert code == 0, f"tritonserver exited with {code}"
