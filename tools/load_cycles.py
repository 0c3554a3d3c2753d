# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Load to ready of one model, side by side between builds: one
tritonserver per build (a checkout with tritonpy built into its own .venv)
and mode (plain, and sandboxed: --backend-config=tritonpy,stub-sandbox=true),
explicit model control, load and unload cycles alternating between the
servers in a rotating order; medians, quartiles and each build's ratio to
the first one named.

    python tools/load_cycles.py --work DIR --model-dir examples/model_repository/add_sub \
        --rounds 80 ref=../other-checkout this=.

Each load is timed from the load request to its answer; an unload waits
for Triton's "successfully unloaded" line (its model deleter runs on after
the answer) and for the stubs to be gone, so that no load overlaps it.
The first cycle of each server starts what later loads reuse (stub
templates) and is not counted. NAME=TREE::ARGS adds tritonserver arguments.
DIR/client.json keeps each load's request and answer times
(time.monotonic_ns), to place the stub's or backend's own marks in them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORK = Path()


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def tree_paths(tree: Path, dest: Path) -> tuple[str, str]:
    code = (
        "import sys; from tritonpy import install as i; "
        f"print(i.backend_dir({str(dest)!r})); print(i.tritonserver())"
    )
    out = subprocess.run(
        [str(tree / ".venv/bin/python"), "-c", code],
        check=True,
        capture_output=True,
        text=True,
        cwd="/",
    ).stdout.split()
    return out[0], out[1]


class Server:
    def __init__(
        self, name: str, tree: Path, sandboxed: bool, model_dir: Path, verbose: int, extra: str = ""
    ) -> None:
        self.spec = (name, tree, sandboxed, model_dir, verbose, extra)
        self.crashes = 0
        self.failures = 0
        self.client: list[tuple[int, int]] = []
        self.times: list[float] = []
        self.start(*self.spec)

    def start(
        self, name: str, tree: Path, sandboxed: bool, model_dir: Path, verbose: int, extra: str
    ) -> None:
        self.name = f"{name}{'/sandbox' if sandboxed else ''}"
        work = WORK / self.name.replace("/", "-")
        if not self.crashes:
            shutil.rmtree(work, ignore_errors=True)
            (work / "repo").mkdir(parents=True)
            # Links followed: example models link their files.
            shutil.copytree(model_dir, work / "repo" / model_dir.name)
        os.chmod(work, 0o755)
        self.model = model_dir.name
        backends, binary = tree_paths(tree, work / "backends")
        self.port = free_port()
        args = [
            binary,
            f"--model-repository={work / 'repo'}",
            f"--backend-directory={backends}",
            f"--http-port={self.port}",
            f"--grpc-port={free_port()}",
            f"--metrics-port={free_port()}",
            "--model-control-mode=explicit",
            f"--log-verbose={verbose}",
        ]
        if sandboxed:
            args.append("--backend-config=tritonpy,stub-sandbox=true")
        args += extra.split()
        self.log = open(work / f"server-{self.crashes}.log", "wb")
        self.proc = subprocess.Popen(
            args, cwd=work, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.conn: http.client.HTTPConnection | None = None
        self.unloads = 0

    def request(self, method: str, path: str) -> int:
        """The answer's status (0: none), on one kept-alive connection."""
        for _ in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                self.conn.request(method, path, body=b"" if method == "POST" else None)
                r = self.conn.getresponse()
                r.read()
                return r.status
            except (OSError, http.client.HTTPException):
                self.conn = None
        return 0

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        while self.request("GET", "/v2/health/live") != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: server did not start")
            time.sleep(0.1)

    def stubs(self) -> set[int]:
        """The server's children that are not stub templates."""
        out = set()
        for e in os.listdir("/proc"):
            if not e.isdigit():
                continue
            try:
                with open(f"/proc/{e}/stat") as f:
                    st = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{e}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if int(st[1]) == self.proc.pid and st[0] != "Z" and b"\0--template\0" not in cmd:
                out.add(int(e))
        return out

    def cycle(self, keep: bool) -> None:
        before = self.stubs()
        t0 = time.perf_counter()
        m0 = time.monotonic_ns()
        code = self.request("POST", f"/v2/repository/models/{self.model}/load")
        dt = time.perf_counter() - t0
        self.client.append((m0, time.monotonic_ns()))
        if code != 200:
            if self.proc.poll() is None:
                # A failed load (seen: the sandbox's mount_setattr EBUSY):
                # counted, not timed; the model is unloaded as after any load.
                self.failures += 1
                print(f"{self.name}: load answered {code}", file=sys.stderr)
                self.request("POST", f"/v2/repository/models/{self.model}/unload")
                return
            self.restart()
            return
        if keep:
            self.times.append(dt * 1000)
        self.request("POST", f"/v2/repository/models/{self.model}/unload")
        # Triton's model deleter runs on after the unload's answer; a load
        # during it overlaps (and 2.51 has crashed in it): wait for its line.
        self.unloads += 1
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(self.log.name, "rb") as f:
                done = f.read().count(b"successfully unloaded '" + self.model.encode())
            if done >= self.unloads and not (self.stubs() - before):
                break
            time.sleep(0.005)
        else:
            if self.proc.poll() is None:
                raise RuntimeError(f"{self.name}: unload did not end")
            self.restart()

    def restart(self) -> None:
        # tritonserver 2.51 has crashed here (SIGSEGV in StopBackendThread,
        # from TritonModel's deleter, on an unload right after a load):
        # start it again, and warm it again.
        self.crashes += 1
        print(f"{self.name}: server died ({self.proc.returncode}); restarted", file=sys.stderr)
        self.conn = None
        self.start(*self.spec)
        self.wait_ready()
        self.cycle(keep=False)

    def stop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def main() -> None:
    global WORK
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="servers' repositories and logs")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--model-dir", type=Path, required=True)
    ap.add_argument("--modes", default="plain,sandbox")
    ap.add_argument("--verbose", type=int, default=0)
    ap.add_argument("trees", nargs="+")
    a = ap.parse_args()
    WORK = a.work.resolve()
    model_dir = a.model_dir.resolve()
    servers = []
    try:
        for spec in a.trees:
            name, tree = spec.split("=", 1)
            tree, _, extra = tree.partition("::")
            for mode in a.modes.split(","):
                srv = Server(
                    name, Path(tree).resolve(), mode == "sandbox", model_dir, a.verbose, extra
                )
                servers.append(srv)
        for s in servers:
            s.wait_ready()
        for s in servers:  # templates started, first imports done
            s.cycle(keep=False)
        for r in range(a.rounds):
            order = servers[r % len(servers) :] + servers[: r % len(servers)]
            if r % 2:
                order.reverse()
            for s in order:
                s.cycle(keep=True)
    finally:
        for s in servers:
            s.stop()
    with open(WORK / "client.json", "w") as f:
        json.dump({s.name: s.client for s in servers}, f)
    first = {}
    print(f"{'build':24} {'median ms':>10} {'p25':>7} {'p75':>7}  {'n':>4} ratio to first build")
    for s in servers:
        q = statistics.quantiles(s.times, n=4)
        med = statistics.median(s.times)
        mode = s.name.partition("/")[2]
        first.setdefault(mode, med)
        print(
            f"{s.name:24} {med:10.2f} {q[0]:7.2f} {q[2]:7.2f}  {len(s.times):4} {med / first[mode]:.3f}  crashes {s.crashes}, failed loads {s.failures}"
        )


if __name__ == "__main__":
    main()
