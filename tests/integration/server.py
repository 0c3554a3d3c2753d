# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A real tritonserver, with tritonpy installed, on free local ports."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonpy import install as inst

MODELS = Path(__file__).resolve().parent / "models"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


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
    sys.path.insert(0, str(EXAMPLES.parent))
    from bench import environment

    backends, env = environment.official_backend_dir(work)
    return TritonServer(
        build_repository(work / "repo", models),
        work,
        args=args,
        backend_dir=backends,
        prefix=["env", *(f"{k}={v}" for k, v in env.items())],
    )


def run_example_client(example: str, *args: str, oks: int, timeout: float = 120) -> str:
    """Runs examples/<example>/client.py with ``args``; asserts it exits 0
    and prints ``oks`` lines ending in "ok" and none "WRONG". Returns its
    output."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / example / "client.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(" ok") == oks and "WRONG" not in out.stdout, out.stdout
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


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (the stubs of a tritonserver)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


class TritonServer:
    def __init__(
        self,
        repo: Path,
        workdir: Path,
        *,
        args: list[str] | None = None,
        backend_dir: Path | None = None,
        prefix: list[str] | None = None,
    ) -> None:
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.repo = repo
        self.backends = backend_dir or inst.backend_dir(workdir / "backends")
        self.log_path = workdir / f"tritonserver-{self.http_port}.log"
        cmd = [
            *(prefix or []),
            str(inst.tritonserver()),
            f"--model-repository={repo}",
            f"--backend-directory={self.backends}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--log-verbose=" + os.environ.get("TRITONPY_TEST_LOG_VERBOSE", "0"),
            *(args or []),
        ]
        self._log = open(self.log_path, "wb")
        # Started in its work directory: the stubs (`python -m tritonpy.stub`)
        # put the server's directory first on sys.path, and in the checkout's
        # top folder that would make tritonpy/ the package they import.
        self.proc = subprocess.Popen(
            cmd, cwd=workdir, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def http_url(self) -> str:
        return f"localhost:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"localhost:{self.grpc_port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str, timeout: float = 30.0) -> bool:
        """Whether ``text`` appears in the log within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _get(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def wait_ready(self, timeout: float = 90.0, path: str = "/v2/health/ready") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"tritonserver exited with {self.proc.returncode}:\n{self.log()[-4000:]}"
                )
            if self._get(path) == 200:
                return
            time.sleep(0.1)
        raise TimeoutError(f"tritonserver not ready after {timeout}s:\n{self.log()[-4000:]}")

    def model_ready(self, name: str) -> bool:
        return self._get(f"/v2/models/{name}/ready") == 200

    def stubs(self) -> list[int]:
        return children(self.proc.pid)

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def stop_after_cancelled_streams(self) -> None:
        """Stop, and fail unless the exit is clean. Known Triton 2.51 quirk:
        after a client cancels a gRPC stream mid-way the server sometimes
        keeps the model alive although every request was released, and
        exits 1 when its exit timeout runs out; that alone is tolerated."""
        code = self.stop()
        assert code == 0 or (code == 1 and "Exit timeout expired" in self.log()), self.log()[-3000:]


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
