# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Load generators: wrk for HTTP; for gRPC bench/grpc_load.cc (C++), or
bench/grpc_load.py where that cannot be built.

Each runner warms up, measures one window, and returns the raw counts plus
the server CPU seconds spent in that window and the CPU the load generator
itself used (to flag a saturated client)."""

from __future__ import annotations

import dataclasses
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tritonpy._testbase.server import Server

GRPC_LOAD = Path(__file__).resolve().parent / "grpc_load.py"
SSE_LOAD = Path(__file__).resolve().parent / "sse_load.py"
# A load generator process above this many cores per thread is the bottleneck.
SATURATED = 0.9
# A load generator whose 1 ms timer wakes this late at p90 (bench/sse_load.py's
# lag_p90_us) is behind, whatever its CPU: waiting for a core of a busy machine
# delays it as much as its own work does, and the delay is in what it measures.
LAG_SATURATED_US = 5000.0
# Seconds bench.llm_floor gets to import torch and build the network.
# How long bench.llm_floor may take to set up (torch, the example) before
# its window: a bound for a broken one, not a wait.
LLM_FLOOR_SETUP_LIMIT = 300.0


@dataclass
class HttpBody:
    """An HTTP inference request, as wrk will send it."""

    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def json_body(model: str, inputs: list[tuple[str, str, list[int], list]]) -> HttpBody:
    doc = {
        "inputs": [
            {"name": n, "datatype": dt, "shape": shape, "data": data}
            for n, dt, shape, data in inputs
        ]
    }
    return HttpBody(
        f"/v2/models/{model}/infer",
        json.dumps(doc, separators=(",", ":")).encode(),
        {"Content-Type": "application/json"},
    )


def binary_body(model: str, nbytes: int) -> HttpBody:
    """UINT8 [nbytes] in, OUTPUT0 back, both as binary tensor data."""
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "UINT8",
                    "shape": [nbytes],
                    "parameters": {"binary_data_size": nbytes},
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        },
        separators=(",", ":"),
    ).encode()
    return HttpBody(
        f"/v2/models/{model}/infer",
        header + bytes(nbytes),
        {
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(header)),
        },
    )


def _lua_string(data: bytes) -> str:
    return (
        '"'
        + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:03d}" for b in data)
        + '"'
    )


def wrk_script(body: HttpBody, dest: Path, paths: list[str] | None = None) -> Path:
    """A wrk Lua script that posts ``body`` and prints one JSON line; with
    ``paths``, to each of them in turn (per wrk thread)."""
    header, payload = body.body, b""
    size = int(body.headers.get("Inference-Header-Content-Length", "0"))
    if size:  # binary tensor data: build the zero bytes in Lua, not in the script text
        header, payload = body.body[:size], body.body[size:]
        assert payload == bytes(len(payload))
    lines = ['wrk.method = "POST"']
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in body.headers.items()]
    lines.append(
        f"wrk.body = {_lua_string(header)}"
        + (f' .. string.rep("\\0", {len(payload)})' if payload else "")
    )
    if paths and len(paths) > 1:
        lines.append("paths = {" + ", ".join(_lua_string(p.encode()) for p in paths) + "}")
        lines.append("sent = 0")
        lines.append("""request = function()
  sent = sent + 1
  return wrk.format(nil, paths[(sent % #paths) + 1])
end""")
    lines.append("""done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,'
    .. '"socket_errors":%d,"status_errors":%d,"timeouts":%d,'
    .. '"p50_us":%d,"p90_us":%d,"p99_us":%d}\\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect + e.read + e.write + e.timeout, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99)))
end""")
    dest.write_text("\n".join(lines) + "\n")
    return dest


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_wrk(
    wrk: str,
    server: Server,
    script: Path,
    path: str,
    *,
    conns: int,
    duration: float,
    warmup: float,
    max_threads: int = 2,
) -> dict:
    threads = max(1, min(conns, max_threads))
    url = f"http://{server.http}{path}"

    def once(seconds: float) -> tuple[subprocess.CompletedProcess, float, float, float]:
        cmd = [
            wrk,
            f"-t{threads}",
            f"-c{conns}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "30s",
            "-s",
            str(script),
            url,
        ]
        c0, s0, t0 = _children_cpu(), server.cpu_seconds(), time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - t0
        return proc, wall, server.cpu_seconds() - s0, _children_cpu() - c0

    if warmup > 0:
        once(warmup)
    proc, wall, server_cpu, client_cpu = once(duration)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout}")
    r = json.loads(line[len("WRKJSON ") :])
    ok = r["requests"] - r["status_errors"]
    window = r["duration_us"] / 1e6
    return {
        "ok": ok,
        "errors": r["status_errors"] + r["socket_errors"],
        "window_s": window,
        "rps": ok / window,
        "p50_us": r["p50_us"],
        "p90_us": r["p90_us"],
        "p99_us": r["p99_us"],
        "server_cpu_s": server_cpu,
        "client_cores": client_cpu / wall,
        "client_saturated": client_cpu / wall / threads >= SATURATED,
    }


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100.0 * len(values)))]


def run_grpc(
    server: Server,
    *,
    mode: str,
    model: str,
    conns: int,
    duration: float,
    warmup: float,
    procs: int,
    tokens: int = 100,
    spinup: float = 1.5,
    client: str | None = None,
    payloads: Path | None = None,
    on_window: Callable[[str], None] | None = None,
    payload: bytes | None = None,
) -> dict:
    """Run the gRPC load generator over one window: ``client`` (the C++
    bench/grpc_load.cc, one process: it needs a small part of a core), or
    else ``procs`` grpc_load.py workers sharing ``conns``. The C++ client
    sends a request serialized here, written under ``payloads``.
    ``on_window("start")`` and ``on_window("end")`` are called when the
    window opens and closes. ``payload``: the serialized request a stream
    sends (default: N = ``tokens`` for the stream models)."""
    extra: list[str] = []
    command = [sys.executable, str(GRPC_LOAD)]
    if client is not None or payload is not None:
        from bench import grpc_load

        if payload is None:
            payload = (
                grpc_load.stream_request(model, tokens)
                if mode == "stream"
                else grpc_load.add_sub_request(model)
            )
        where = (payloads or Path(tempfile.gettempdir())) / f"grpc-{mode}-{model}.pb"
        where.write_bytes(payload)
        extra = ["--payload", str(where)]
    if client is not None:
        procs = 1
        command = [client]
    argv = [*command, "--target", server.grpc, "--mode", mode, "--model", model, *extra]
    window = Window(conns, procs, tokens, duration, warmup, spinup)
    outs, r = _window_workers(server, argv, window, on_window)
    if mode == "unary":
        lat = [x for o in outs for x in o["latency_us"]]
        r.update(
            rps=r["ok"] / duration,
            p50_us=_percentile(lat, 50),
            p90_us=_percentile(lat, 90),
            p99_us=_percentile(lat, 99),
        )
    else:
        r.update(stream_figures(outs, duration))
    return r


@dataclass
class Window:
    """One measurement: ``procs`` load generator processes share ``conns``
    for ``duration`` seconds after ``spinup`` + ``warmup``."""

    conns: int
    procs: int
    tokens: int
    duration: float
    warmup: float
    spinup: float
    grace: float = 60.0  # how long past the window a process may take


# How many times a window is run again because a load generator was not
# ready when it opened (a busy machine starts Python slowly), each time
# with twice the spin-up.
LATE_RETRIES = 3


def _window_workers(
    server: Server,
    command: list[str],
    w: Window,
    on_window: Callable[[str], None] | None = None,
) -> tuple[list[dict], dict]:
    """Runs the load generator ``command`` (plus the window's arguments)
    over one window: the processes' JSON outputs, and their counts summed
    with the server's CPU seconds in the window. A window that a Python
    process joined late (it measured less than the window, or nothing)
    is run again with a longer spin-up."""
    for _ in range(LATE_RETRIES):
        outs, counts = _one_window(server, command, w, on_window)
        if not any(o.get("joined_late") for o in outs):
            break
        w = dataclasses.replace(w, spinup=w.spinup * 2)
    return outs, counts


def _one_window(
    server: Server,
    command: list[str],
    w: Window,
    on_window: Callable[[str], None] | None,
) -> tuple[list[dict], dict]:
    conns, tokens, duration = w.conns, w.tokens, w.duration
    procs = max(1, min(w.procs, conns))
    start = time.time() + w.spinup + w.warmup
    end = start + duration
    shares = [conns // procs + (i < conns % procs) for i in range(procs)]
    workers = [
        subprocess.Popen(
            [*command, *window_argv(n, tokens, start, end)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in shares
    ]
    time.sleep(max(0.0, start - time.time()))
    s0 = server.cpu_seconds()
    if on_window is not None:
        on_window("start")
    time.sleep(max(0.0, end - time.time()))
    server_cpu = server.cpu_seconds() - s0
    if on_window is not None:
        on_window("end")
    outs = []
    for worker in workers:
        try:
            stdout, stderr = worker.communicate(timeout=duration + w.grace)
        except subprocess.TimeoutExpired:
            worker.kill()
            stdout, stderr = worker.communicate()
        if worker.returncode != 0 or not stdout.strip():
            name = Path(command[1] if command[0] == sys.executable else command[0]).stem
            raise RuntimeError(f"{name} failed ({worker.returncode}): {stderr.strip()[-2000:]}")
        outs.append(json.loads(stdout))
    return outs, _window_counts(outs, duration, server_cpu)


def client_saturated(outs: list[dict], duration: float) -> bool:
    """Whether a load generator process was the bottleneck of a window:
    one near a full core (a Python client has one: its loop's thread),
    whatever the rest of the machine does, or one whose timer woke late
    (lag_p90_us), whatever its own CPU."""
    return any(
        o.get("client_cpu_s", 0.0) / duration >= SATURATED
        or o.get("lag_p90_us", 0.0) >= LAG_SATURATED_US
        for o in outs
    )


def _window_counts(outs: list[dict], duration: float, server_cpu: float) -> dict:
    ok = sum(o.get("ok", 0) for o in outs)
    cores = [o.get("client_cpu_s", 0.0) / duration for o in outs]
    lags = [o["lag_p90_us"] for o in outs if "lag_p90_us" in o]
    return {
        "ok": ok,
        "errors": sum(o.get("errors", 0) for o in outs),
        "window_s": duration,
        "server_cpu_s": server_cpu,
        "client_cores": sum(cores),
        "client_process_cores": max(cores),
        "client_lag_p90_us": max(lags, default=None),
        "client_runqueue_wait_s": max(
            (o["runqueue_wait_s"] for o in outs if "runqueue_wait_s" in o), default=None
        ),
        "client_saturated": client_saturated(outs, duration),
        "error": next((o["error"] for o in outs if "error" in o), None),
        "timed_out": any(o.get("timed_out") for o in outs),
    }


def run_sse(
    server: Server,
    *,
    model: str,
    conns: int,
    duration: float,
    warmup: float,
    procs: int,
    tokens: int,
    spinup: float = 1.5,
    rate: float = 0.0,
) -> dict:
    """bench/sse_load.py (``generate_stream`` clients that check every
    token) over one window, ``procs`` processes sharing ``conns``: the
    figures of run_grpc; a stream that lost a token, got one out of order
    or did not end counts as an error, the first described in "bad".
    With ``rate``, open loop: ``rate`` new streams/s in all (``conns``
    then bounds the open ones), and "late" counts arrivals past the bound."""
    from bench.sse_load import WINDOW_STREAM_LIMIT_S

    argv = [sys.executable, str(SSE_LOAD), "--target", server.http, "--model", model]
    if rate:
        procs = max(1, min(procs, conns))
        argv += ["--rate", repr(rate / procs)]
    window = Window(conns, procs, tokens, duration, warmup, spinup, WINDOW_STREAM_LIMIT_S + 60)
    outs, r = _window_workers(server, argv, window)
    r["bad"] = next((o["bad"] for o in outs if "bad" in o), None)
    if r["bad"] is not None and r["error"] is None:
        r["error"] = r["bad"]
    r.update(stream_figures(outs, duration))
    if rate:
        r["late"] = sum(o.get("late", 0) for o in outs)
    return r


def stream_figures(outs: list[dict], duration: float) -> dict:
    """tokens/s, TTFT and inter-token percentiles of streaming clients'
    outputs (grpc_load's JSON, or bench.llm_floor's)."""
    ttft = [x for o in outs for x in o["ttft_us"]]
    itl = [x for o in outs for x in o["itl_us"]]
    toks = sum(o["tokens"] for o in outs)
    return {
        "tokens": toks,
        "tok_s": toks / duration,
        "ttft_p50_ms": _ms(_percentile(ttft, 50)),
        "ttft_p99_ms": _ms(_percentile(ttft, 99)),
        "itl_p50_us": _percentile(itl, 50),
        "itl_p99_us": _percentile(itl, 99),
        "samples": {"ttft_ms": [x / 1000 for x in _thin(ttft)], "itl_us": _thin(itl)},
    }


def run_llm_floor(*, conns: int, tokens: int, duration: float, warmup: float) -> dict:
    """bench.llm_floor over one window, in a process of its own: the same
    figures as run_grpc, its own CPU as the server's, and the step's busy
    seconds. The window opens ``warmup`` seconds after the process says it
    is set up (importing torch alone takes seconds on a busy machine)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.llm_floor",
            *window_argv(conns, tokens, 0.0, 0.0),
            "--window-from-stdin",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    stdout = proc.stdout
    assert stdout is not None
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(LLM_FLOOR_SETUP_LIMIT)
    if not ready or ready[0].strip() != "ready":
        proc.kill()
        _, err = proc.communicate()
        raise RuntimeError(f"llm_floor did not set up ({ready}): {err.strip()[-2000:]}")
    start = time.time() + warmup
    end = start + duration
    try:
        out, err = proc.communicate(f"{start!r} {end!r}\n", timeout=warmup + duration + 120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"llm_floor failed ({proc.returncode}): {err.strip()[-2000:]}")
    o = json.loads(out)
    r = {
        "ok": o["ok"],
        "errors": o["errors"],
        "window_s": duration,
        "server_cpu_s": o["cpu_s"],
        "client_cores": 0.0,
        "client_saturated": False,
        "busy_s": o["busy_s"],
    }
    r.update(stream_figures([o], duration))
    return r


def window_argv(conns: int, tokens: int, start: float, end: float) -> list[str]:
    """Arguments of grpc_load.window_arguments."""
    return [
        "--conns",
        str(conns),
        "--tokens",
        str(tokens),
        "--start",
        repr(start),
        "--end",
        repr(end),
    ]


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def _thin(values: list[float], keep: int = 2000) -> list[float]:
    """Evenly spaced order statistics: enough to draw a distribution."""
    if len(values) <= keep:
        return sorted(values)
    values = sorted(values)
    return [values[int(i * (len(values) - 1) / (keep - 1))] for i in range(keep)]
