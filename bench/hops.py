# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Where one add_sub request's time goes, hop by hop, by Triton's own trace.

    python -m bench.hops [--rounds 2] [--requests 2000] [--system tritonpy ...]
                         [--protocol http|grpc] [--model add_sub|bls] [--publish]

Starts one server per system in turn, for each of ``--rounds`` rounds (the
benchmark suite's repository and backends) with Triton's trace at every request (``--trace-config
level=TIMESTAMPS``, ``rate=1``), and sends add_sub requests one after the
other on one connection: over HTTP (the default) the JSON body of `make
bench` on one kept-alive socket; with ``--protocol grpc`` the ModelInfer
request of bench/grpc_load.py, serialized once, on one gRPC channel. The client stamps each request with the monotonic clock just before
its send and just after the last byte of its answer; Triton's trace stamps
are from the same clock, so each trace is placed on its request's line.
Prints, per system, the median of each hop between consecutive stamps
(CHAIN), and each group of threads' time on a CPU per request (the
schedstat of /proc: the stub processes, tritonpy's reader threads,
Triton's other threads), with the time they waited for a CPU.
``--model bls`` sends the same inputs to the benchmark's BLS model, whose
``execute`` calls add_sub with a blocking ``exec()`` (no floor: it has no
BLS); its chain is the outer request's, the inner call inside the
COMPUTE_INPUT_END → INFER_RESPONSE_COMPLETE hop, and the thread table
counts every stub. ``--publish`` (HTTP add_sub only) writes the result file (docs/benchmarks/hops.json) and the
section of docs/benchmarks.md drawn from it.

Tracing every request costs time of its own (Triton takes each stamp and
keeps the trace): read the differences between systems, measured in the
same run, more than the absolute figures.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import platform
import socket
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from bench import environment as env
from bench.models import write_repository
from tritonpy._testbase.server import Server

MODEL = "add_sub"
MODELS = ("add_sub", "bls")  # bls calls add_sub: both are loaded for it
BODY = {
    "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
    ]
}
SEND, RECV = "client send", "client receive"
SYSTEMS = ("tritonpy", "official", "floor")


def _request(port: int, model: str = MODEL) -> bytes:
    body = json.dumps(BODY, separators=(",", ":")).encode()
    head = (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _read_answer(sock: socket.socket) -> None:
    """Read one HTTP answer with a Content-Length to its last byte."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"the request failed: {head.decode(errors='replace')} {rest[:200]!r}")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        rest += chunk


def drive_grpc(target: str, requests: int, model: str = MODEL) -> list[tuple[int, int]]:
    """(send, receive) monotonic ns of each gRPC ModelInfer, one after the
    other on one channel; the request is serialized once and sent as bytes."""
    import grpc

    from bench import grpc_load

    payload = grpc_load.add_sub_request(model)
    out = []
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(grpc_load.SERVICE + "ModelInfer")
        for _ in range(requests):
            sent = time.monotonic_ns()
            call(payload)
            out.append((sent, time.monotonic_ns()))
    return out


def drive(port: int, requests: int, model: str = MODEL) -> list[tuple[int, int]]:
    """(send, receive) monotonic ns of each request, one after the other."""
    payload = _request(port, model)
    out = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(requests):
            sent = time.monotonic_ns()
            sock.sendall(payload)
            _read_answer(sock)
            out.append((sent, time.monotonic_ns()))
    return out


def place(
    traces: list[dict],
    calls: list[tuple[int, int]],
    warmup: int,
    chain: tuple[str, ...] = (),
    model: str = MODEL,
) -> list[dict[str, int]]:
    """Each trace of ``model`` as ns since its request's send, keyed by
    stamp name, with the client's receive; warm-up requests and traces
    without every stamp of ``chain`` (default: HTTP's CHAIN) left out."""
    chain = chain or CHAIN
    sends = [s for s, _ in calls]
    # Triton writes a trace in parts (its model, then each stamp as it is
    # taken), each with the trace's id.
    merged: dict[int, dict] = {}
    for part in traces:
        trace = merged.setdefault(part["id"], {"stamps": {}})
        trace["model"] = part.get("model_name", trace.get("model"))
        for t in part.get("timestamps", ()):
            trace["stamps"][t["name"]] = int(t["ns"])
    placed = []
    for trace in merged.values():
        stamps = trace["stamps"]
        if trace["model"] != model or not any(name in chain for name in stamps):
            continue
        # The first stamp of the chain: gRPC's GRPC_WAITREAD_START is taken
        # while the request before it is in flight.
        first = min(ns for name, ns in stamps.items() if name in chain)
        i = bisect.bisect_right(sends, first) - 1
        if i < warmup or not sends[i] <= first <= calls[i][1]:
            continue
        sent, received = calls[i]
        row = {name: ns - sent for name, ns in stamps.items()}
        row[SEND], row[RECV] = 0, received - sent
        if all(name in row for name in chain):
            placed.append(row)
    return placed


# The stamps one add_sub request passes, in the order each system takes
# them on its way to the client; a hop is the time between two of them.
# REQUEST_END (the request's release) is left out: tritonpy releases a
# request after its answer has left, off the client's path.
CHAIN = (
    SEND,
    "HTTP_RECV_START",
    "HTTP_RECV_END",
    "REQUEST_START",
    "QUEUE_START",
    "COMPUTE_START",
    "COMPUTE_INPUT_END",
    "INFER_RESPONSE_COMPLETE",
    "HTTP_SEND_START",
    "HTTP_SEND_END",
    RECV,
)
# The same over gRPC. GRPC_WAITREAD_END: a completion-queue thread of
# Triton's gRPC front end has the whole request. GRPC_SEND_START: the
# response is complete and its write (gRPC's Finish) starts, on the thread
# that completed the response. GRPC_SEND_END is stamped when a
# completion-queue thread learns the write is done, often after the client
# has the answer: it is off the chain (see OFF_CHAIN).
GRPC_CHAIN = (
    SEND,
    "GRPC_WAITREAD_END",
    "REQUEST_START",
    "QUEUE_START",
    "COMPUTE_START",
    "COMPUTE_INPUT_END",
    "INFER_RESPONSE_COMPLETE",
    "GRPC_SEND_START",
    RECV,
)
CHAINS = {"http": CHAIN, "grpc": GRPC_CHAIN}
# Stamps off the client's path, as µs after the response's completion
# (INFER_RESPONSE_COMPLETE): the request's release, and (gRPC) when a
# completion-queue thread took the write's completion.
OFF_CHAIN = ("REQUEST_END", "GRPC_SEND_END")


def summarise(placed: list[dict[str, int]], chain: tuple[str, ...] = ()) -> dict:
    """The median of each hop of ``chain`` (default: HTTP's CHAIN), of the
    whole request, and of the stamps OFF_CHAIN after the response."""
    chain = chain or CHAIN
    hops = [
        {
            "from": a,
            "to": b,
            "median_us": round(statistics.median(r[b] - r[a] for r in placed) / 1e3, 1),
        }
        for a, b in itertools.pairwise(chain)
    ]
    whole = [r[RECV] / 1e3 for r in placed]
    out = {
        "traced": len(placed),
        "hops": hops,
        "whole_us": round(statistics.median(whole), 1),
        "whole_mean_us": round(statistics.fmean(whole), 1),
    }
    after = {}
    for name in OFF_CHAIN:
        got = [r[name] - r["INFER_RESPONSE_COMPLETE"] for r in placed if name in r]
        if got and name not in chain:
            after[name] = round(statistics.median(got) / 1e3, 1)
    if chain is not CHAIN:  # the published HTTP result file keeps its fields
        out["after_response_us"] = after
    return out


def _switches(base: str) -> int:
    """The context switches of the thread at ``base`` in /proc, voluntary
    (it blocked) and not (it was preempted)."""
    total = 0
    for line in Path(f"{base}/status").read_text().splitlines():
        if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
            total += int(line.split(":", 1)[1])
    return total


def _on_cpu(pids: list[tuple[int, str]]) -> dict[str, tuple[int, int, int]]:
    """Group -> (ns on a CPU, ns waiting for one, context switches) summed
    over the threads of ``pids``, from /proc's schedstat and status. Groups:
    the stub processes, tritonpy's named threads (the reader), Triton's
    other threads."""
    out: dict[str, tuple[int, int, int]] = {}
    for pid, kind in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            base = f"/proc/{pid}/task/{tid}"
            try:
                name = Path(f"{base}/comm").read_text().strip()
                run, wait = (int(v) for v in Path(f"{base}/schedstat").read_text().split()[:2])
                switches = _switches(base)
            except (OSError, ValueError):
                continue
            group = kind if kind == "stub" else name if name.startswith("tritonpy-") else kind
            had = out.get(group, (0, 0, 0))
            out[group] = (had[0] + run, had[1] + wait, had[2] + switches)
    return out


class Load(NamedTuple):
    """What the client sends: through which front end, to which model."""

    protocol: str = "http"
    model: str = MODEL


HTTP_ADD_SUB = Load()


def run_system(
    system: str, requests: int, warmup: int, work: Path, load: Load = HTTP_ADD_SUB
) -> tuple[list[dict[str, int]], dict[str, tuple[int, int, int]]]:
    """One server of ``system``: its traced requests placed on the client's
    line, and each thread group's (ns on a CPU, ns waiting, context
    switches) over them."""
    protocol, model = load
    repo = write_repository(work / f"repo-{system}", system)
    backends, extra_env = env.system_backend_dir(system, work)
    trace_file = work / f"trace-{system}.json"
    trace_file.unlink(missing_ok=True)
    server = Server(
        repo,
        backends,
        work / f"server-{system}.log",
        models=[MODEL] if model == MODEL else [MODEL, model],
        env=extra_env,
        extra_args=[
            f"--trace-config=triton,file={trace_file}",
            "--trace-config=triton,log-frequency=0",
            "--trace-config=level=TIMESTAMPS",
            "--trace-config=rate=1",
            "--trace-config=count=-1",
        ],
    )
    try:
        server.wait_ready()

        def send(n: int) -> list[tuple[int, int]]:
            if protocol == "grpc":
                return drive_grpc(server.grpc, n, model)
            return drive(server.http_port, n, model)

        calls = send(warmup)
        pids = [(server.proc.pid, "Triton's threads"), *((p, "stub") for p in server.stubs())]
        before = _on_cpu(pids)
        calls += send(requests)
        after = _on_cpu(pids)
    finally:
        server.stop()
    placed = place(json.loads(trace_file.read_text()), calls, warmup, CHAINS[protocol], model)
    if len(placed) < requests // 2:
        raise RuntimeError(
            f"{system}: {len(placed)} of {requests} traces fall inside their request's "
            "send and receive: is Triton's trace clock the monotonic one?"
        )
    spent: dict[str, tuple[int, int, int]] = {}
    for g, (run, wait, switches) in after.items():
        run0, wait0, switches0 = before.get(g, (0, 0, 0))
        spent[g] = (run - run0, wait - wait0, switches - switches0)
    return placed, spent


def measure(
    systems: list[str],
    rounds: int,
    requests: int,
    warmup: int,
    work: Path,
    load: Load = HTTP_ADD_SUB,
) -> dict:
    """Each system in turn, ``rounds`` times; the hops' medians over every
    traced request of all rounds, the thread groups' means."""
    placed: dict[str, list[dict[str, int]]] = {s: [] for s in systems}
    spent: dict[str, dict[str, list[int]]] = {s: {} for s in systems}
    for _ in range(rounds):
        for system in systems:
            got, cpu = run_system(system, requests, warmup, work, load)
            placed[system] += got
            for g, counts in cpu.items():
                total = spent[system].setdefault(g, [0, 0, 0])
                for i, c in enumerate(counts):
                    total[i] += c
            print(f"{system}: {len(got)} requests traced", flush=True)
    out = {}
    for system in systems:
        n = rounds * requests
        result = summarise(placed[system], CHAINS[load.protocol])
        result["on_cpu_us"] = {
            g: round(run / n / 1e3, 1) for g, (run, _, _) in sorted(spent[system].items())
        }
        result["waiting_for_cpu_us"] = round(
            sum(wait for _, wait, _ in spent[system].values()) / n / 1e3, 1
        )
        # How often the threads block or are preempted per request: each
        # switch is a wake-up or a wait on the request's path or beside it.
        result["switches_per_request"] = {
            g: round(sw / n, 2) for g, (_, _, sw) in sorted(spent[system].items())
        }
        out[system] = result
    return out


def table(result: dict) -> str:
    """The hops of the result file as a Markdown table, one column per system."""
    systems = list(result["systems"])
    chain = CHAINS[result.get("protocol", "http")]
    rows = [
        "| hop (Triton's trace stamps) | " + " | ".join(f"{s} median µs" for s in systems) + " |",
        "|---|" + "---|" * len(systems),
    ]
    for i, (a, b) in enumerate(itertools.pairwise(chain)):
        cells = [f"{result['systems'][s]['hops'][i]['median_us']:.1f}" for s in systems]
        rows.append(f"| {a} → {b} | " + " | ".join(cells) + " |")
    rows.append(
        "| whole request | "
        + " | ".join(f"{result['systems'][s]['whole_us']:.1f}" for s in systems)
        + " |"
    )
    return "\n".join(rows)


def after_table(result: dict) -> str:
    """The median µs from each system's response completion to the stamps
    off the client's path (OFF_CHAIN) that its result has."""
    systems = list(result["systems"])
    names = [
        n
        for n in OFF_CHAIN
        if any(n in result["systems"][s].get("after_response_us", {}) for s in systems)
    ]
    rows = [
        "| after INFER_RESPONSE_COMPLETE | " + " | ".join(f"{s} median µs" for s in systems) + " |",
        "|---|" + "---|" * len(systems),
    ]
    for n in names:
        cells = [
            str(result["systems"][s].get("after_response_us", {}).get(n, "–")) for s in systems
        ]
        rows.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(rows) if names else ""


def _group_rows(result: dict, systems: list[str], key: str, unit: str) -> list[str]:
    """A table's head and one row per group of threads of ``key`` (a
    per-group figure of each system); groups idle in every system are left
    out."""
    groups = sorted({g for s in systems for g in result["systems"][s][key]})
    rows = [
        "| threads | " + " | ".join(f"{s} {unit}" for s in systems) + " |",
        "|---|" + "---|" * len(systems),
    ]
    for g in groups:
        cells = [result["systems"][s][key].get(g) for s in systems]
        if any(cells):
            rows.append(
                f"| {g} | " + " | ".join("–" if c is None else str(c) for c in cells) + " |"
            )
    return rows


def switch_table(result: dict) -> str:
    """Context switches per request of each group of threads, one column
    per system (empty for a result file without them)."""
    systems = [s for s in result["systems"] if "switches_per_request" in result["systems"][s]]
    if not systems:
        return ""
    return "\n".join(_group_rows(result, systems, "switches_per_request", "switches / request"))


def cpu_table(result: dict) -> str:
    """On-CPU time per request of each group of threads, one column per system."""
    systems = list(result["systems"])
    rows = _group_rows(result, systems, "on_cpu_us", "on-CPU µs / request")
    rows.append(
        "| whole request, mean µs | "
        + " | ".join(str(result["systems"][s]["whole_mean_us"]) for s in systems)
        + " |"
    )
    rows.append(
        "| waiting for a CPU, all threads | "
        + " | ".join(str(result["systems"][s]["waiting_for_cpu_us"]) for s in systems)
        + " |"
    )
    return "\n".join(rows)


ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "docs" / "benchmarks" / "hops.json"
STUB_COST = ROOT / "docs" / "benchmarks" / "stub_cost.json"
PAGE = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- hops -->", "<!-- /hops -->"
# Who spends each hop of CHAIN (by index): Triton's front end and core,
# the backend (with the Triton calls it makes for its response), or the
# client with the kernel's loopback and the wake-up of the receiving thread.
OWNER = ("client", "triton", "triton", "triton", "triton", "backend", "backend",
         "triton", "triton", "client")  # fmt: skip


def load() -> dict | None:
    """The result file; None before there is one."""
    return json.loads(RESULT.read_text()) if RESULT.exists() else None


def _shares(result: dict) -> str:
    lines = []
    sums = {}
    for system, got in result["systems"].items():
        by = {o: sum(h["median_us"] for h, w in zip(got["hops"], OWNER, strict=True) if w == o)
              for o in ("triton", "backend", "client")}  # fmt: skip
        sums[system] = by
        lines.append(
            f"- {system}: Triton's hops {by['triton']:.1f} µs, the backend's "
            f"{by['backend']:.1f} µs, the client's and the kernel's {by['client']:.1f} µs "
            f"(sums of the medians in the run)."
        )
    if "floor" in sums:
        for system in sums:
            if system == "floor":
                continue
            extra = sums[system]["backend"] - sums["floor"]["backend"]
            lines.append(
                f"- {system}'s backend hops took {extra:.1f} µs more than the floor's: "
                "what a Python backend adds to the request in this run."
            )
    return "\n".join(lines)


def _stub_split() -> str:
    counts = json.loads(STUB_COST.read_text())["instructions_per_request"]
    own = counts["empty"] / counts["add_sub"]
    return (
        f"{own:.0%} of add_sub's instructions in the stub are the `empty` model's "
        "(the stub's own receive, decode, dispatch, encode and send), "
        f"{1 - own:.0%} what model.py's tensors and arithmetic add"
    )


def section(result: dict | None) -> str:
    """docs/benchmarks.md's section drawn from the result file."""
    if result is None:
        return f"{BEGIN}{END}"
    return f"""{BEGIN}
## One add_sub request, hop by hop

Where the microseconds of one add_sub request go, from the client's send
to its receive, over HTTP at one connection, by Triton's own trace
(`--trace-config level=TIMESTAMPS`, every request traced). The figures
and their result file, [benchmarks/hops.json](benchmarks/hops.json), come
from

```sh
.venv/bin/python -m bench.hops --publish
```

Run {result["date"]} on {result["machine"]} (load average
{result["load_average"][0]} at the start, {result["load_average"][1]} at the end); {result["rounds"]} alternating
rounds of one server per system, {result["requests"]:,} requests each after a
warm-up; the medians are over the requests of every round. The client is a
Python loop on one kept-alive socket, not wrk, and tracing every request
costs time of its own: the whole request is not the p50 of the table
above. Compare the systems within this table.

{table(result)}

Who spends each hop:

- client send → HTTP_RECV_START: the client's send, the kernel's loopback
  and the wake-up of Triton's HTTP thread until it starts reading. The
  client's and the kernel's; Triton's wake-up cannot be told apart from
  outside.
- HTTP_RECV_START → REQUEST_START: Triton's HTTP front end reads the body,
  parses the JSON and builds the inference request. Triton's.
- REQUEST_START → COMPUTE_START: Triton's core queues the request; the
  model instance's thread takes it and calls the backend's Execute.
  Triton's.
- COMPUTE_START → COMPUTE_INPUT_END: the backend's Execute until its inputs
  are ready, as each backend reports it. tritonpy stamps the moment before
  it writes the EXECUTE frame (the inputs are in shared memory by then);
  the floor reports one time for all its stamps, so its whole share is in
  the next hop.
- COMPUTE_INPUT_END → INFER_RESPONSE_COMPLETE: for tritonpy, the EXECUTE
  frame written, the stub woken, its decode and batch, model.py's
  `execute`, the answer encoded and sent, the backend's reader thread
  woken, the Triton response built and sent
  (`TRITONBACKEND_ResponseSend`), until Triton hands the finished response
  to its HTTP front end. The trace has no stamp inside it: the thread table
  below splits it by time on a CPU. For the floor: its C++ add_sub and its
  response. Triton's response calls (the front end allocating the outputs,
  completing the response) are inside this hop for every backend and
  cannot be separated by the trace.
- INFER_RESPONSE_COMPLETE → HTTP_SEND_START: Triton's front end writes the
  JSON answer and hands it to its HTTP thread. Triton's code, but compare
  the columns: the floor completes its response inside Execute, on
  Triton's model instance thread, tritonpy from its reader thread, and
  the trace does not say why the hop is longer for both Python backends
  (the HTTP thread's wake-up, the two cores shared with the stub, the
  thread the response's JSON is built on).
- HTTP_SEND_START → HTTP_SEND_END: Triton's send. Triton's.
- HTTP_SEND_END → client receive: the kernel's loopback, the client's
  wake-up and its read. The client's and the kernel's.

REQUEST_END, the request's release, is off the client's path in tritonpy:
the reader releases a request after its answer has gone to Triton, so it
is often stamped after HTTP_SEND_START. Each hop's median is taken alone,
so the medians do not add up to the whole request's exactly. Summed by
who spends them:

{_shares(result)}

Time on a CPU per request of each group of threads over the same requests,
from `/proc/<pid>/task/<tid>/schedstat` (user and kernel time together),
and the time they were ready to run with no core free. These are means,
with the slow requests in them, so compare them with the mean whole
request, not with the medians above:

{cpu_table(result)}

The stub's row is the stub process's time on a CPU: decode, batch,
model.py's `execute`, encode and its two socket calls. Inside it, by
callgrind's counts (performance.md's table, `python -m bench.stub_cost
--model empty` and `--model add_sub`), {_stub_split()}; instructions are
not time, so this splits the stub's row only roughly. The rest of the
COMPUTE_INPUT_END → INFER_RESPONSE_COMPLETE hop is the reader thread's time
on a CPU and the two wake-ups (the stub's and the reader's), which no
counter here separates from each other.
{END}"""


def publish(result: dict) -> None:
    """Write the result file and the page's section drawn from it."""
    RESULT.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    text = PAGE.read_text()
    begin, end = text.index(BEGIN), text.index(END) + len(END)
    PAGE.write_text(text[:begin] + section(result) + text[end:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.hops", description=__doc__.split("\n")[0])
    p.add_argument("--system", action="append", choices=SYSTEMS)
    p.add_argument("--rounds", type=int, default=2, help="each system this many times, in turn")
    p.add_argument("--requests", type=int, default=2000, help="traced requests per server")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument(
        "--protocol",
        choices=sorted(CHAINS),
        default="http",
        help="the front end the requests go through (default http)",
    )
    p.add_argument(
        "--model",
        choices=MODELS,
        default=MODEL,
        help="add_sub (the default), or bls: a model calling add_sub (no floor)",
    )
    p.add_argument(
        "--publish",
        action="store_true",
        help="write docs/benchmarks/hops.json and docs/benchmarks.md's section from it (HTTP)",
    )
    a = p.parse_args(argv)
    if a.publish and (a.protocol != "http" or a.model != MODEL):
        p.error("--publish writes the HTTP add_sub section only")
    if a.model != MODEL and "floor" in (a.system or ()):
        p.error("the floor has no BLS model")
    from bench.report import machine  # report renders this tool's section

    m = machine()
    load = Path("/proc/loadavg").read_text().split()[0]
    result = {
        "what": f"median µs of each hop of one {a.model} request over {a.protocol.upper()} "
        "at one connection, "
        "from Triton's trace, python -m bench.hops",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{m.get('cpu', platform.machine())}, {m.get('cores')} cores",
        "load_average": [load],
        "rounds": a.rounds,
        "requests": a.requests,
        "systems": {},
    }
    with tempfile.TemporaryDirectory(prefix="tritonpy-hops-") as tmp:
        systems = a.system or [s for s in SYSTEMS if a.model == MODEL or s != "floor"]
        result["systems"] = measure(
            systems, a.rounds, a.requests, a.warmup, Path(tmp), Load(a.protocol, a.model)
        )
    result["load_average"].append(Path("/proc/loadavg").read_text().split()[0])
    if a.protocol != "http":
        result["protocol"] = a.protocol
    print(table(result))
    print()
    print(after_table(result))
    print()
    print(cpu_table(result))
    print()
    print(switch_table(result))
    if a.publish:
        publish(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
