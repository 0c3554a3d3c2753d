# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A tritonserver on free local ports, and what /proc says about it: the
one harness of the benchmarks (``Server``) and the integration tests
(tests/integration/server.py builds its TritonServer on ``Tritonserver``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tritonpy import install as inst

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _kind(pid: int) -> str:
    """ "template", "spare" (a template's sandboxed child cloned ahead of
    its stub, ``... --template ... --spare``) or "" (a stub)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            line = f.read()
    except OSError:
        return ""
    if b"\0--template\0" not in line:
        return ""
    return "spare" if line.rstrip(b"\0").endswith(b"\0--spare") else "template"


def children(pid: int, *, templates: bool = False, spares: bool = False) -> list[int]:
    """The live children of ``pid``: for a tritonserver, its stubs. Stub
    templates (``python -m tritonpy.stub --template``, which fork stubs
    with stub-fork=true) and their spares are children too but not stubs:
    listed only with ``templates=True``, ``spares=True``."""
    want = "spare" if spares else "template" if templates else ""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st and int(st[1]) == pid and st[0] != "Z" and _kind(int(entry)) == want:
                out.append(int(entry))
    return out


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid``: its children, theirs, and so on
    (a stub forked by a stub template is the template's child)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st and st[0] != "Z":
                parent[int(entry)] = int(st[1])
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.extend(kids)
        todo.extend(kids)
    return out


def pss_bytes(pid: int) -> int:
    """The PSS of ``pid`` (its private pages and its share of the ones it
    shares), from /proc/<pid>/smaps_rollup; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) << 10
    except OSError:
        pass
    return 0


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except OSError:
        return 0


class Tritonserver:
    """A tritonserver process serving ``repo`` with the backends in
    ``backends``, on free local ports, writing its log to ``log_path`` (in a
    directory: tritonserver-<http port>.log there). It runs in ``cwd``
    (default: the log's directory), never in the checkout:
    its stubs (`python -m tritonpy.stub`) put the server's directory first on
    sys.path. ``prefix`` is a command it runs under (``env``, a profiler)."""

    def __init__(
        self,
        repo: Path,
        backends: Path,
        log_path: Path,
        *,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        prefix: list[str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.repo = repo
        self.backends = backends
        cmd = [
            *(prefix or []),
            str(inst.tritonserver()),
            f"--model-repository={repo}",
            f"--backend-directory={backends}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            *(args or []),
        ]
        if log_path.is_dir():
            log_path = log_path / f"tritonserver-{self.http_port}.log"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd or log_path.parent,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        self.ready_s: float | None = None

    @property
    def http(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 120.0,
    ) -> tuple[int, bytes]:
        """(HTTP status, body); status 0 when the server did not answer."""
        req = urllib.request.Request(
            f"http://{self.http}{path}", data=body, method=method, headers=headers or {}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError as e:
            return 0, str(e).encode()

    def wait_ready(self, timeout: float = 180.0, path: str = "/v2/health/ready") -> float:
        """Seconds from the start until ``path`` answered 200; raises when
        the server exits first or ``timeout`` passes (with the log's end)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"tritonserver exited with {self.proc.returncode}; log {self.log_path}:\n"
                    + self.log()[-4000:]
                )
            if self.request("GET", path, timeout=2)[0] == 200:
                self.ready_s = time.monotonic() - self.started
                return self.ready_s
            time.sleep(0.05)
        raise TimeoutError(
            f"tritonserver not ready after {timeout}s; log {self.log_path}:\n" + self.log()[-4000:]
        )

    def stubs(self) -> list[int]:
        return children(self.proc.pid)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then after ``timeout`` SIGKILL to the server and its
        stubs; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


class Server(Tritonserver):
    """The benchmarks' server: explicit model control, loading ``models``,
    staying up when one fails to load."""

    def __init__(
        self,
        repo: Path,
        backends: Path,
        log_path: Path,
        *,
        models: list[str],
        env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        super().__init__(
            repo,
            backends,
            log_path,
            args=[
                "--model-control-mode=explicit",
                "--exit-on-error=false",
                "--strict-readiness=false",
                "--log-verbose=0",
                *(f"--load-model={m}" for m in models),
                *(extra_args or []),
            ],
            env=env,
        )

    def model_states(self) -> dict[str, tuple[str, str]]:
        """name -> (state, reason) from the repository index."""
        code, body = self.request("POST", "/v2/repository/index", b"{}")
        if code != 200:
            return {}
        return {m["name"]: (m.get("state", ""), m.get("reason", "")) for m in json.loads(body)}

    def stats(self, model: str) -> dict:
        code, body = self.request("GET", f"/v2/models/{model}/stats")
        if code != 200:
            return {}
        return json.loads(body)["model_stats"][0]

    def cpu_seconds(self) -> float:
        """CPU time of tritonserver, its live descendants (the stubs) and
        the children it already reaped."""
        total = 0
        st = _stat(self.proc.pid)
        if st:
            total += sum(int(x) for x in st[11:15])  # utime stime cutime cstime
        # Descendants, not only children: stubs forked by a stub template
        # are the template's children.
        for c in descendants(self.proc.pid):
            cst = _stat(c)
            if cst:
                total += int(cst[11]) + int(cst[12])
        return total / TICK
