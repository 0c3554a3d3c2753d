# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Soak: mixed traffic at high concurrency against a real tritonserver,
bounded in time and in requests, while descriptors, threads, RSS and
resident arena bytes of the server and of every stub are sampled.

    python tests/soak/soak.py --seconds 600 --concurrency 64
    python tests/soak/soak.py --requests 100000
    python tests/soak/soak.py --seconds 240 --mix bls=1    # one kind alone

The mix: add_sub over HTTP, identity with tensors from 4 B to 4 MiB (and
now and then 64 MiB), BLS (bls_add_sub calling add_sub_any with sizes up
to 1 MiB), decoupled streams of mock_llm over gRPC run to their end,
async_sleep requests cancelled by a client timeout, and models answering
with errors on purpose. Expected errors (the errors model, the client
timeouts) are counted apart; anything else is unexpected.

The report compares a baseline (after a warm-up, at rest) with the same
figures at rest after the run; tests/integration/test_leaks.py runs a
CI-sized version and asserts on it.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from server import TritonServer, build_repository, eventually  # noqa: E402

MODELS = ["add_sub", "add_sub_any", "identity", "errors", "async_sleep", "mock_llm", "bls_add_sub"]

# Operation -> weight in the mix.
MIX = {
    "add_sub": 30,
    "identity": 25,
    "bls": 10,
    "stream": 10,
    "cancel": 5,
    "error": 10,
    "identity_large": 1,
}


# ---------------------------------------------------------------- sampling


def _fd_targets(pid: int) -> list[tuple[str, str]]:
    out = []
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in names:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            out.append((path, os.readlink(path)))
        except OSError:
            pass
    return out


_SERVER_ARENA = "/memfd:tritonpy-arena"
_STUB_ARENA = "/memfd:tritonpy-stub"


def _own_prefix(stub: bool) -> str:
    return _STUB_ARENA if stub else _SERVER_ARENA


def _peer_prefix(stub: bool) -> str:
    return _SERVER_ARENA if stub else _STUB_ARENA


def _memfds(pid: int, prefix: str) -> dict[int, os.stat_result]:
    """The memfds named ``prefix``* that ``pid`` holds, by inode: once each,
    however many descriptors it has of one."""
    out: dict[int, os.stat_result] = {}
    for path, target in _fd_targets(pid):
        if target.startswith(prefix):
            try:
                st = os.stat(path)
            except OSError:
                continue
            out.setdefault(st.st_ino, st)
    return out


def arenas(pid: int, stub: bool = False) -> list[tuple[int, int]]:
    """(size, resident bytes) of each memfd arena `pid` owns, once each
    (Python's mmap holds a second descriptor of every arena it maps). A
    stub owns "tritonpy-stub-*", the server "tritonpy-arena"; each also
    maps the other's, counted at its owner."""
    return [(st.st_size, st.st_blocks * 512) for st in _memfds(pid, _own_prefix(stub)).values()]


def sample(pid: int, stub: bool = False) -> dict[str, int]:
    """fds (sockets excluded: client connections come and go; so are the
    peer's arenas this process maps, which follow the peer's arena count:
    peer_arena_fds, and peer_arenas counts them once each), threads, RSS,
    and the memfd arenas this process owns: bytes resident in them
    (arena_kib) and their size (arena_size_kib)."""
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    peer = _peer_prefix(stub)
    fds = peer_fds = 0
    for _, target in _fd_targets(pid):
        if target.startswith(peer):
            peer_fds += 1
        elif not target.startswith("socket:"):
            fds += 1
    owned = arenas(pid, stub)
    return {
        "fds": fds,
        "peer_arena_fds": peer_fds,
        "peer_arenas": len(_memfds(pid, peer)),
        "threads": int(status["Threads"].strip()),
        "rss_kib": int(status["VmRSS"].split()[0]),
        "arena_kib": sum(r for _, r in owned) >> 10,
        "arena_size_kib": sum(n for n, _ in owned) >> 10,
    }


def stale_peer_arenas(server: TritonServer) -> dict[str, int]:
    """Per process, the peer arenas it maps that no peer holds any more
    (a mapping kept after its owner let the arena go is a leak)."""
    procs = {"server": (server.proc.pid, False)}
    for pid in server.stubs():
        procs[str(pid)] = (pid, True)
    owned = {False: set(), True: set()}  # stub? -> arenas owned by that side
    for pid, stub in procs.values():
        owned[stub] |= _memfds(pid, _own_prefix(stub)).keys()
    return {
        name: len(_memfds(pid, _peer_prefix(stub)).keys() - owned[not stub])
        for name, (pid, stub) in procs.items()
    }


def sample_all(server: TritonServer) -> dict[str, dict[str, int]]:
    """Per process: "server", and each stub by its model instance name."""
    out = {"server": sample(server.proc.pid)}
    for pid in server.stubs():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            name = args[args.index(b"--instance") + 1].decode()
        except (OSError, ValueError, IndexError):
            name = str(pid)
        try:
            out[name] = sample(pid, stub=True)
        except OSError:
            pass
    return out


def at_rest(server: TritonServer, timeout: float = 120.0) -> dict[str, dict[str, int]]:
    """``sample_all`` once two samples in a row, 0.2 s apart, agree on all
    but resident memory: what the last traffic held (batches, descriptors,
    threads, arena pages) is given back by then. Resident memory is what a
    soak watches, so it is not waited on."""

    def held(sample: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        return {p: {k: v for k, v in s.items() if k != "rss_kib"} for p, s in sample.items()}

    def steady() -> dict[str, dict[str, int]]:
        first = sample_all(server)
        time.sleep(0.2)
        second = sample_all(server)
        assert held(first) == held(second), (first, second)
        return second

    return eventually(steady, timeout)


def growth(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    return {p: {k: after[p][k] - before[p][k] for k in before[p]} for p in before if p in after}


# ---------------------------------------------------------------- traffic


@dataclass
class Tally:
    ok: Counter = field(default_factory=Counter)
    expected: Counter = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, op: str, kind: str, message: str = "") -> None:
        with self.lock:
            if kind == "ok":
                self.ok[op] += 1
            elif kind == "expected":
                self.expected[op] += 1
            else:
                self.unexpected.append(f"{op}: {message}")

    @property
    def total(self) -> int:
        return sum(self.ok.values()) + sum(self.expected.values()) + len(self.unexpected)


class Worker:
    """One thread's clients (tritonclient's HTTP client is not thread-safe)."""

    def __init__(self, server: TritonServer, seed: int) -> None:
        self.http = httpclient.InferenceServerClient(
            server.http_url, network_timeout=120, connection_timeout=120
        )
        self.grpc = grpcclient.InferenceServerClient(server.grpc_url)
        self.rng = np.random.default_rng(seed)
        self.pick = random.Random(seed)

    def close(self) -> None:
        self.http.close()
        self.grpc.close()

    def run(self, op: str) -> str:
        """Runs one operation; returns "ok" or "expected", raises otherwise."""
        return getattr(self, "op_" + op)()

    def _fp32(self, name: str, arr: np.ndarray) -> httpclient.InferInput:
        x = httpclient.InferInput(name, list(arr.shape), "FP32")
        x.set_data_from_numpy(arr, binary_data=True)
        return x

    def op_add_sub(self) -> str:
        a = self.rng.random(4, dtype=np.float32)
        r = self.http.infer("add_sub", [self._fp32("INPUT0", a), self._fp32("INPUT1", a)])
        assert np.allclose(r.as_numpy("OUTPUT0"), a + a)
        return "ok"

    def _identity(self, n: int) -> str:
        a = self.rng.random(n, dtype=np.float32)
        out = httpclient.InferRequestedOutput("OUT_FP32", binary_data=True)
        r = self.http.infer("identity", [self._fp32("IN_FP32", a)], outputs=[out])
        assert np.array_equal(r.as_numpy("OUT_FP32"), a)
        return "ok"

    def op_identity(self) -> str:
        return self._identity(self.pick.choice([1, 256, 16 << 10, 256 << 10, 1 << 20]))

    def op_identity_large(self) -> str:
        return self._identity(16 << 20)  # 64 MiB

    def op_bls(self) -> str:
        n = self.pick.choice([4, 1024, 64 << 10, 256 << 10])
        a = self.rng.random(n, dtype=np.float32)
        t = httpclient.InferInput("TARGET", [1], "BYTES")
        t.set_data_from_numpy(np.array([b"add_sub_any"], dtype=object))
        r = self.http.infer("bls_add_sub", [self._fp32("INPUT0", a), self._fp32("INPUT1", a), t])
        assert np.allclose(r.as_numpy("OUTPUT1"), 0)
        return "ok"

    def op_error(self) -> str:
        mode = self.pick.choice(["bad_output", "raise", "error", "list_str"])
        m = httpclient.InferInput("MODE", [1], "BYTES")
        m.set_data_from_numpy(np.array([mode.encode()], dtype=object))
        try:
            self.http.infer("errors", [m])
        except InferenceServerException:
            return "expected"
        raise AssertionError(f"errors/{mode} answered")

    def op_cancel(self) -> str:
        x = grpcclient.InferInput("IN", [1], "INT32")
        x.set_data_from_numpy(np.array([1], np.int32))
        s = grpcclient.InferInput("SLEEP_MS", [1], "FP32")
        s.set_data_from_numpy(np.array([300], np.float32))
        try:
            self.grpc.infer("async_sleep", [x, s], client_timeout=0.05)
        except InferenceServerException as e:
            if "Deadline" in str(e) or "DEADLINE" in str(e.status() or ""):
                return "expected"
            raise
        raise AssertionError("async_sleep answered before the client timeout")

    def op_stream(self) -> str:
        q: queue.Queue = queue.Queue()
        self.grpc.start_stream(callback=lambda result, error: q.put(error))
        try:
            n = self.pick.choice([1, 8, 32])
            p = grpcclient.InferInput("PROMPT", [1], "BYTES")
            p.set_data_from_numpy(np.array([b"soak"], dtype=object))
            k = grpcclient.InferInput("MAX_TOKENS", [1], "INT32")
            k.set_data_from_numpy(np.array([n], np.int32))
            self.grpc.async_stream_infer("mock_llm", [p, k])
            for _ in range(n):
                error = q.get(timeout=60)
                if error is not None:
                    raise error
        finally:
            self.grpc.stop_stream()
        return "ok"


def traffic(
    server: TritonServer,
    *,
    seconds: float,
    requests: int,
    concurrency: int,
    seed: int = 0,
    mix: dict[str, int] | None = None,
) -> Tally:
    """Runs the mix on `concurrency` threads until `seconds` passed or
    `requests` operations were started, whichever comes first."""
    mix = mix or MIX
    ops, weights = list(mix), list(mix.values())
    tally = Tally()
    deadline = time.monotonic() + seconds
    started = [0]
    lock = threading.Lock()

    def loop(i: int) -> None:
        w = Worker(server, seed * 1000 + i)
        try:
            while time.monotonic() < deadline:
                with lock:
                    if started[0] >= requests:
                        return
                    started[0] += 1
                op = w.pick.choices(ops, weights)[0]
                try:
                    tally.count(op, w.run(op))
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    tally.count(op, "unexpected", f"{type(e).__name__}: {e}"[:500])
        finally:
            w.close()

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally


def soak(
    server: TritonServer,
    *,
    seconds: float,
    requests: int,
    concurrency: int,
    warmup_seconds: float = 5,
    sample_every: float = 10,
    mix: dict[str, int] | None = None,
    log=print,
) -> dict:
    """Warm-up, baseline at rest, the run (sampled), the same figures at
    rest again. Returns the report (also logged as it goes)."""
    traffic(
        server, seconds=warmup_seconds, requests=10**9, concurrency=concurrency, seed=1, mix=mix
    )
    # Arenas grow to the most tensors ever in flight at once, then keep
    # their descriptors (and their first 64 MiB resident) for reuse: a
    # burst of the largest request among small ones, at the run's
    # concurrency, brings them to that high-water mark before the baseline
    # (large inputs sent ahead while small ones hold the arena, and large
    # answers still being written to their clients); rarer peaks later in
    # a long run show as a step, a leak as a slope.
    traffic(
        server,
        seconds=120,
        requests=4 * concurrency,
        concurrency=concurrency,
        seed=2,
        mix={"identity_large": 1, "identity": 1},
    )
    baseline = at_rest(server)
    log(f"baseline: {json.dumps(baseline)}")
    samples = []
    stop = threading.Event()

    def sampler() -> None:
        start = time.monotonic()
        while not stop.wait(sample_every):
            s = sample_all(server)
            samples.append({"t": round(time.monotonic() - start, 1), "procs": s})
            srv = s["server"]
            stubs_rss = sum(v["rss_kib"] for k, v in s.items() if k != "server")
            log(
                f"t={samples[-1]['t']:>6}s server rss {srv['rss_kib'] >> 10} MiB "
                f"fds {srv['fds']} threads {srv['threads']} arena {srv['arena_kib'] >> 10} MiB; "
                f"stubs rss {stubs_rss >> 10} MiB"
            )

    t = threading.Thread(target=sampler, daemon=True)
    t.start()
    start = time.monotonic()
    tally = traffic(
        server, seconds=seconds, requests=requests, concurrency=concurrency, seed=2, mix=mix
    )
    elapsed = time.monotonic() - start
    stop.set()
    t.join()
    after = at_rest(server)  # batches ended, arenas given back
    report = {
        "seconds": round(elapsed, 1),
        "operations": tally.total,
        "ops_per_second": round(tally.total / elapsed, 1),
        "concurrency": concurrency,
        "ok": dict(tally.ok),
        "expected_errors": dict(tally.expected),
        "unexpected_errors": len(tally.unexpected),
        "unexpected_examples": tally.unexpected[:10],
        "baseline": baseline,
        "after": after,
        "growth": growth(baseline, after),
        "samples": samples,
    }
    return report


def summary(report: dict) -> str:
    lines = [
        f"{report['operations']} operations in {report['seconds']} s "
        f"({report['ops_per_second']}/s, concurrency {report['concurrency']}); "
        f"unexpected errors: {report['unexpected_errors']}",
        f"ok: {report['ok']}",
        f"expected errors: {report['expected_errors']}",
        "growth from baseline to rest after the run (fds, threads, RSS KiB, arena KiB):",
    ]
    for proc, g in report["growth"].items():
        b = report["baseline"][proc]
        lines.append(
            f"  {proc:<22} fds {g['fds']:+d} threads {g['threads']:+d} "
            f"rss {g['rss_kib']:+d} ({100 * g['rss_kib'] / max(1, b['rss_kib']):+.1f}%) "
            f"arena {g['arena_kib']:+d}"
        )
    for e in report["unexpected_examples"]:
        lines.append(f"  unexpected: {e}")
    return "\n".join(lines)


def parse_mix(text: str) -> dict[str, int]:
    """ "bls=1,add_sub=3" -> {"bls": 1, "add_sub": 3}; names from MIX."""
    mix = {}
    for item in text.split(","):
        name, _, weight = item.partition("=")
        if name not in MIX or not weight.isdigit() or int(weight) < 1:
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected NAME=WEIGHT with NAME one of {', '.join(MIX)}"
            )
        mix[name] = int(weight)
    return mix


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=600, help="run at most this long")
    parser.add_argument(
        "--requests", type=int, default=10**9, help="start at most this many operations"
    )
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--sample-every", type=float, default=10)
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument(
        "--mix",
        type=parse_mix,
        help=f"operations and weights instead of the default mix, e.g. bls=1 (of {', '.join(MIX)})",
    )
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tritonpy-soak-"))
    srv = TritonServer(build_repository(work / "repo", MODELS), work)
    try:
        srv.wait_ready()
        report = soak(
            srv,
            seconds=args.seconds,
            requests=args.requests,
            concurrency=args.concurrency,
            sample_every=args.sample_every,
            mix=args.mix,
        )
    finally:
        code = srv.stop()
    report["server_exit_code"] = code
    report["load_average"] = os.getloadavg()
    print(summary(report))
    print(f"server exit code {code}; load average {report['load_average']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if report["unexpected_errors"] == 0 and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
