# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Where a request's CPU time goes: per-thread CPU and context switches.

    python -m bench.profile [--system tritonpy] [--model add_sub] [--conns 64]
                            [--protocol http|grpc]

``--model stream_async`` or ``llm`` drives gRPC streams and counts per token.

Starts one server of the chosen system (the benchmark suite's repository
and backend directory), drives the model over HTTP with wrk (or over gRPC
with the suite's C++ client, bench/grpc_load.cc), and reads
/proc before and after: CPU microseconds, voluntary / involuntary
context switches and moves to another CPU per request, for each group of threads (tritonpy's reader
threads, Triton's other threads, the stub processes). Counts, not
timings, are what matter on a shared machine: a wake-up of a sleeping
thread on another core costs an order of magnitude more than the work most
requests carry.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections import defaultdict
from pathlib import Path

from bench import environment as env
from bench.loads import json_body, run_grpc, run_wrk, wrk_script
from bench.models import ADD_SUB_INPUTS, BATCHED_INPUT, VEC_INPUT, Inputs, write_repository
from tritonpy._testbase.server import TICK, Server

BODIES: dict[str, Inputs] = {
    "add_sub": ADD_SUB_INPUTS,
    "async_sleep": VEC_INPUT,
    "batched": BATCHED_INPUT,
    "bls": ADD_SUB_INPUTS,
}
# Decoupled models driven over gRPC streams: tokens per request. Counts are
# then per token.
STREAMED = {"stream_async": 32, "llm": 64}
# Models a model calls (BLS) are loaded with it.
CALLS = {"bls": ["add_sub"]}


def _migrations(base: str) -> int:
    """How often the thread was moved to another CPU (``se.nr_migrations``);
    0 where the kernel does not show it."""
    try:
        with open(f"{base}/sched") as f:
            for line in f:
                if line.startswith("se.nr_migrations"):
                    return int(line.rsplit(":", 1)[1])
    except (OSError, ValueError):
        pass
    return 0


def _threads(pid: int) -> dict[int, tuple[str, int, int, int, int]]:
    """tid -> (name, CPU ticks, voluntary, involuntary switches, migrations)."""
    out: dict[int, tuple[str, int, int, int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/comm") as f:
                name = f.read().strip()
            with open(f"{base}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
            with open(f"{base}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        out[int(tid)] = (
            name,
            int(st[11]) + int(st[12]),
            int(status["voluntary_ctxt_switches"]),
            int(status["nonvoluntary_ctxt_switches"]),
            _migrations(base),
        )
    return out


def snapshot(server: Server) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    snap = {}
    for pid, group in [(server.proc.pid, "server")] + [(p, "stub") for p in server.stubs()]:
        for tid, (name, ticks, vol, invol, moved) in _threads(pid).items():
            if name.startswith("tritonpy-"):
                role = name
            elif group == "stub":
                # the stub's main thread runs its event loop; model threads
                # (a batcher's step, executors) are the others
                role = "stub main thread" if tid == pid else "stub other threads"
            else:
                role = f"{group} threads"
            snap[(role, tid)] = (ticks, vol, invol, moved)
    return snap


def grpc_tokens(model: str) -> int:
    """The --tokens the gRPC load generator gets for `model`: a stream's
    length, else 1 (bench/grpc_load.cc refuses anything below 1, also for
    unary calls, which ignore it)."""
    return STREAMED.get(model, 1)


def _stream_payload(model: str, tokens: int) -> bytes:
    from bench import grpc_load

    if model == "llm":
        from bench.llm_floor import PROMPT

        return grpc_load.llm_request(model, PROMPT, tokens)
    return grpc_load.stream_request(model, tokens)


def profile(
    system: str,
    model: str,
    conns: int,
    seconds: float,
    work: Path,
    server_args: list[str] | None = None,
    model_params: dict[str, str] | None = None,
    protocol: str = "http",
) -> str:
    repo = write_repository(work / f"repo-{system}", system)
    if model_params and system != "floor":
        config = repo / model / "config.pbtxt"
        with config.open("a") as f:
            for key, value in model_params.items():
                f.write(f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n')
    backends, extra_env = env.system_backend_dir(system, work)
    streamed = model in STREAMED
    if streamed:
        protocol = "grpc"
    if protocol == "grpc":
        client = env.ensure_grpc_client(work)
        if client is None or model not in ("add_sub", "bls", *STREAMED):
            raise SystemExit("--protocol grpc needs the C++ client and an add_sub-like model")
    else:
        wrk = env.ensure_wrk()
        script = wrk_script(json_body(model, BODIES[model]), work / f"{model}.lua")
    server = Server(
        repo,
        backends,
        work / f"server-{system}.log",
        models=[model, *CALLS.get(model, [])],
        env=extra_env,
        extra_args=server_args,
    )
    before: dict[tuple[str, int], tuple[int, int, int, int]] = {}
    after: dict[tuple[str, int], tuple[int, int, int, int]] = {}
    try:
        server.wait_ready()
        if protocol == "grpc":
            # the client measures a window of its own: snapshot around it
            tokens = grpc_tokens(model)
            res = run_grpc(
                server,
                mode="stream" if streamed else "unary",
                model=model,
                conns=conns,
                duration=seconds,
                warmup=1.0,
                procs=1,
                tokens=tokens,
                client=client,
                payloads=work,
                payload=_stream_payload(model, tokens) if streamed else None,
                on_window=lambda phase: (before if phase == "start" else after).update(
                    snapshot(server)
                ),
            )
        else:
            before.update(snapshot(server))
            res = run_wrk(
                wrk,
                server,
                script,
                f"/v2/models/{model}/infer",
                conns=conns,
                duration=seconds,
                warmup=1.0,
            )
            after.update(snapshot(server))
    finally:
        server.stop()
    n = max(1, res["tokens"] if streamed else res["ok"])
    per = "token" if streamed else "req"
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for thread, (ticks, vol, invol, moved) in after.items():
        t0, v0, i0, m0 = before.get(thread, (0, 0, 0, 0))
        g = groups[thread[0]]
        g[0] += (ticks - t0) / TICK * 1e6 / n
        g[1] += (vol - v0) / n
        g[2] += (invol - i0) / n
        g[3] += (moved - m0) / n
    rate = (
        f"{res['tok_s']:,.0f} tokens/s, TTFT p50 {res['ttft_p50_ms']} ms, "
        f"inter-token p50 {res['itl_p50_us']} us"
        if streamed
        else f"{res['rps']:,.0f} req/s, p50 {res['p50_us']} us"
    )
    lines = [
        f"{system} {model} @{conns} ({protocol}): {rate}, {res['errors']} errors",
        f"| threads | CPU us / {per} | voluntary switches / {per} | involuntary / {per} "
        f"| CPU changes / {per} |",
        "|---|---|---|---|---|",
    ]
    total = [0.0, 0.0, 0.0, 0.0]
    for role, g in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"| {role} | {g[0]:.1f} | {g[1]:.2f} | {g[2]:.2f} | {g[3]:.2f} |")
        total = [a + b for a, b in zip(total, g, strict=True)]
    lines.append(f"| all | {total[0]:.1f} | {total[1]:.2f} | {total[2]:.2f} | {total[3]:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n")[0])
    p.add_argument(
        "--system",
        action="append",
        choices=["tritonpy", "official", "floor"],
        help="system(s) to profile, in turn (default all three)",
    )
    p.add_argument("--model", default="add_sub", choices=sorted([*BODIES, *STREAMED]))
    p.add_argument("--conns", type=int, default=64)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--protocol", choices=["http", "grpc"], default="http")
    p.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="extra tritonserver argument, e.g. "
        "--server-arg=--backend-config=tritonpy,stub-timeout-seconds=60",
    )
    p.add_argument(
        "--model-param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter added to the model's config.pbtxt (tritonpy and official), "
        "e.g. --model-param sync_prefetch_batches=4",
    )
    a = p.parse_args(argv)
    params = dict(kv.split("=", 1) for kv in a.model_param)
    with tempfile.TemporaryDirectory(prefix="tritonpy-profile-") as tmp:
        for system in a.system or ["tritonpy", "official", "floor"]:
            report = profile(
                system,
                a.model,
                a.conns,
                a.seconds,
                Path(tmp),
                a.server_arg,
                params,
                a.protocol,
            )
            print(report, flush=True)
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
