# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Run the suite: set up, then rounds of (tritonpy, official, floor), each a
fresh tritonserver running every scenario, then the report.

    python -m bench                  # the full suite (make bench)
    python -m bench --smoke          # seconds per scenario, one round (make bench-smoke)
    python -m bench --help
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench import environment as env
from bench import paths, report
from bench.models import ON_DEMAND, models_for, write_repository
from bench.scenarios import (
    SSE_PEAK,
    Config,
    Context,
    Scenario,
    build,
    peak_rate,
    sse_peak_calibration,
)
from tritonpy._testbase.server import Server

SYSTEMS = ("tritonpy", "official", "floor")
HERE = Path(__file__).resolve().parent


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(",") if x)


def _sizes(text: str) -> tuple[int, ...]:
    units = {"k": 1 << 10, "m": 1 << 20}
    out = []
    for x in text.lower().replace("ib", "").split(","):
        out.append(int(x[:-1]) * units[x[-1]] if x[-1] in units else int(x))
    return tuple(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    d = Config()
    p = argparse.ArgumentParser(
        prog="tritonpy bench",
        description="Benchmark tritonpy against the official Python backend and a native "
        "floor backend in the same tritonserver: alternating rounds, medians "
        "with min/max, ratios. Writes a markdown table, JSON and PNG plots.",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny end-to-end run: 1 round, ~1 s per scenario, 10 tokens per stream",
    )
    p.add_argument("--rounds", type=int, help=f"alternating rounds (default {d.rounds})")
    p.add_argument(
        "--duration", type=float, help=f"measured seconds per scenario (default {d.duration})"
    )
    p.add_argument("--warmup", type=float, help=f"warm-up seconds, excluded (default {d.warmup})")
    p.add_argument("--conns", help="throughput connection counts (default 16,64,256)")
    p.add_argument(
        "--grpc-procs", type=int, help=f"gRPC load generator processes (default {d.grpc_procs})"
    )
    p.add_argument("--identity-sizes", help="identity tensor sizes (default 1KiB,1MiB,16MiB)")
    p.add_argument(
        "--identity-conns", type=int, help=f"identity connections (default {d.identity_conns})"
    )
    p.add_argument("--async-conns", help="async model connection counts (default 64,256)")
    p.add_argument("--streams", help="concurrent gRPC streams (default 64,256)")
    p.add_argument("--tokens", type=int, help=f"tokens per stream request (default {d.tokens})")
    p.add_argument(
        "--async-streams", help="concurrent streams of stream_async (default 64,256,1000)"
    )
    p.add_argument("--sse-streams", help="concurrent SSE streams of stream_async (default 64,256)")
    p.add_argument(
        "--async-tokens",
        type=int,
        help=f"tokens per stream_async request (default {d.async_tokens})",
    )
    p.add_argument("--llm-streams", help="concurrent streams of llm (default 1,16,64,256)")
    p.add_argument("--sse-rates", help="open loop: new SSE streams/s of stream_async (default 180)")
    p.add_argument("--pa-conns", help="perf_analyzer add_sub concurrency (default 1,64)")
    p.add_argument("--pa-rates", help="perf_analyzer add_sub requests/s (default 1000)")
    p.add_argument("--genai-llm-streams", help="genai-perf llm concurrency (default 16)")
    p.add_argument("--genai-llm-rates", help="genai-perf llm requests/s (default 8)")
    p.add_argument(
        "--many-sizes",
        help="stubs of many_instances, many_models and many_groups (default 16,64,128)",
    )
    p.add_argument(
        "--many-framework",
        choices=("torch", "numpy"),
        help=f"what their model imports (default {d.many_framework})",
    )
    p.add_argument(
        "--many-rounds",
        type=int,
        help=f"rounds many_instances, many_models and many_groups run in (default {d.many_rounds})",
    )
    p.add_argument(
        "--shared-sizes",
        help="instances of shared_weights (default " + ",".join(map(str, d.shared_sizes)) + ")",
    )
    p.add_argument(
        "--shared-requests",
        type=int,
        help=f"requests shared_weights answers before its second PSS (default {d.shared_requests})",
    )
    p.add_argument(
        "--shared-mib",
        type=int,
        help=f"MiB of weights of the shared_weights model (default {d.shared_mib})",
    )
    p.add_argument(
        "--budget-minutes",
        type=float,
        help="start no round that would end after this many minutes, not counting the "
        f"scenarios that run in fewer rounds (default {d.budget_minutes})",
    )
    p.add_argument(
        "--streaming-rounds",
        type=int,
        help="rounds the streaming scenarios (stream_async, SSE, llm) run in "
        f"(default {d.streaming_rounds})",
    )
    p.add_argument(
        "--sse-peak-rate",
        type=float,
        help="streams/s of the SSE open loop at the official's peak (default: measured "
        f"from the official in closed loop at --sse-peak-streams, {d.sse_peak_streams})",
    )
    p.add_argument(
        "--sse-peak-streams",
        type=int,
        help="closed-loop streams that find the official's peak SSE rate "
        f"(default {d.sse_peak_streams})",
    )
    p.add_argument("--systems", default=",".join(SYSTEMS), help="subset of tritonpy,official,floor")
    p.add_argument("--only", default="", help="comma list of scenario id prefixes to run")
    p.add_argument(
        "--out",
        default=None,
        help="directory for table, JSON, plots (default bench/results, "
        "bench/results/smoke with --smoke)",
    )
    p.add_argument(
        "--publish",
        action="store_true",
        help="also write docs/benchmarks.md, docs/benchmarks/*.png, the result file "
        "docs/benchmarks/bench.json and the README's table drawn from it",
    )
    p.add_argument(
        "--render",
        metavar="JSON",
        help="only re-render table, plots (and docs with --publish) from a bench.json",
    )
    p.add_argument("--command", default=None, help=argparse.SUPPRESS)  # shown in the docs
    return p.parse_args(argv)


def make_config(a: argparse.Namespace) -> Config:
    cfg = Config()
    if a.smoke:
        cfg.rounds, cfg.duration, cfg.warmup, cfg.tokens = 1, 1.0, 0.0, 10
        cfg.load_repeats, cfg.budget_minutes, cfg.async_duration = 1, 10.0, 1.0
        cfg.start_repeats = 2
        cfg.async_streams, cfg.async_tokens = (8, 64), 10
        cfg.sse_streams = (8,)
        cfg.llm_streams, cfg.llm_tokens = (1, 4), 8
        cfg.llm_duration, cfg.llm_warmup = 1.0, 0.0
        cfg.many_sizes, cfg.many_framework = (2,), "numpy"
        cfg.shared_sizes, cfg.shared_requests, cfg.shared_mib = (2,), 200, 16
        cfg.pa_conns, cfg.pa_rates, cfg.field_window_ms = (1,), (100.0,), 1000
        cfg.genai_llm_streams, cfg.genai_llm_rates = (2,), (2.0,)
        cfg.sse_rates, cfg.sse_peak_streams = (20.0,), 8
    for name, conv in (
        ("rounds", int),
        ("duration", float),
        ("warmup", float),
        ("grpc_procs", int),
        ("identity_conns", int),
        ("tokens", int),
        ("async_tokens", int),
        ("budget_minutes", float),
        ("conns", _ints),
        ("async_conns", _ints),
        ("streams", _ints),
        ("async_streams", _ints),
        ("sse_streams", _ints),
        ("llm_streams", _ints),
        ("many_sizes", _ints),
        ("many_framework", str),
        ("many_rounds", int),
        ("shared_sizes", _ints),
        ("shared_requests", int),
        ("shared_mib", int),
        ("identity_sizes", _sizes),
        ("sse_rates", _floats),
        ("sse_peak_rate", float),
        ("streaming_rounds", int),
        ("sse_peak_streams", int),
        ("pa_conns", _ints),
        ("pa_rates", _floats),
        ("genai_llm_streams", _ints),
        ("genai_llm_rates", _floats),
    ):
        value = getattr(a, name)
        if value is not None:
            setattr(cfg, name, conv(value))
    return cfg


def failure_reason(text: str) -> str:
    """A failure's reason as the result files keep it: at most 400
    characters, its paths as :func:`bench.paths.portable` writes them."""
    return paths.portable(text)[:400]


def measure(
    ctx: Context, scen: Scenario, system: str, server: Server, states: dict[str, tuple[str, str]]
) -> dict:
    """One scenario on one system in one round."""
    if not scen.applies_to(system):
        if scen.systems is not None and system not in scen.systems:
            return {"status": "n/a", "reason": f"runs on {', '.join(scen.systems)} only"}
        return {"status": "n/a", "reason": f"{system} has no {scen.model} model"}
    standalone: Callable[[Context], dict] | None = scen.floor if system == "floor" else None
    if scen.own is not None:
        standalone = functools.partial(scen.own, system)
    if standalone is None:
        state, reason = states.get(scen.model, ("UNKNOWN", "not in the repository index"))
        if state != "READY":
            return {"status": "failed", "reason": failure_reason(f"{scen.model} {state}: {reason}")}
    if scen.probe is not None and standalone is None:
        code, body = server.request(
            "POST", scen.probe.path, scen.probe.body, scen.probe.headers, timeout=30
        )
        if code != 200:
            return {
                "status": "failed",
                "reason": failure_reason(f"probe HTTP {code}: {body.decode(errors='replace')}"),
            }
    try:
        raw = standalone(ctx) if standalone is not None else scen.run(ctx, server)
    except Exception as e:  # a broken scenario must not end the suite
        traceback.print_exc()
        return {"status": "failed", "reason": failure_reason(f"{type(e).__name__}: {e}")}
    if raw.get("skipped"):  # e.g. too little free memory for the run
        return {"status": "skipped", "reason": failure_reason(raw["skipped"])}
    if not raw.get("ok"):
        return {
            "status": "failed",
            "reason": failure_reason(raw.get("error") or "no successful request"),
        }
    if "server_cpu_s" in raw:
        raw["cpu_s_per_1k"] = raw["server_cpu_s"] / raw.get("tokens", raw["ok"]) * 1000
    cores = os.cpu_count() or 1
    client = raw.get("client_cores") or 0.0
    server_cores = raw["server_cpu_s"] / raw["window_s"] if raw.get("window_s") else 0.0
    result = {
        "status": "ok",
        "metrics": {m.key: raw.get(m.key) for m in scen.metrics},
        "errors": raw.get("errors", 0),
        "client_cores": raw.get("client_cores"),
        "server_cores": server_cores,
        "client_saturated": bool(raw.get("client_saturated")),
        # the busiest load generator process, how late its timer woke, how
        # long it waited for a CPU
        "client_process_cores": raw.get("client_process_cores"),
        "client_lag_p90_us": raw.get("client_lag_p90_us"),
        "client_runqueue_wait_s": raw.get("client_runqueue_wait_s"),
        # the client takes a real share of a machine that is out of CPU
        "machine_saturated": (client >= 0.25 * cores and client + server_cores >= 0.9 * cores),
    }
    for key in ("p50_us", "p99_us", "rps"):  # kept for the plots
        if key in raw:
            result.setdefault("extra", {})[key] = raw[key]
    if "samples" in raw:
        result["samples"] = raw["samples"]
    return result


def run_pass(
    ctx: Context,
    system: str,
    scenarios: list[Scenario],
    work: Path,
    backends: Path,
    server_env: dict[str, str],
    extra_args: list[str],
    round_no: int,
) -> dict[str, dict]:
    repo = work / f"repo-{system}"
    write_repository(repo, system)
    start_models = [m for m in models_for(system) if m not in ON_DEMAND]
    server = Server(
        repo,
        backends,
        work / f"server-{system}-r{round_no}.log",
        models=start_models,
        env=server_env,
        extra_args=extra_args,
    )
    out: dict[str, dict] = {}
    try:
        server.wait_ready()
        states = server.model_states()
        for scen in scenarios:
            t0 = time.monotonic()
            res = measure(ctx, scen, system, server, states)
            res["seconds"] = round(time.monotonic() - t0, 1)
            out[scen.id] = res
            shown = res.get("metrics") or res.get("reason", "")
            env.log(f"round {round_no} {system:8s} {scen.id:20s} {res['status']:7s} {shown}")
            if server.proc.poll() is not None:
                env.log(f"tritonserver died (exit {server.proc.returncode}); see {server.log_path}")
                states = {}
    except Exception as e:
        traceback.print_exc()
        for scen in scenarios:
            out.setdefault(scen.id, {"status": "failed", "reason": failure_reason(f"server: {e}")})
    finally:
        server.stop()
    return out


def find_sse_peak(ctx: Context, work: Path) -> None:
    """Sets ctx.sse_peak_rate: given (--sse-peak-rate), or the official's
    streams/s in closed loop, measured now, before the rounds."""
    cfg = ctx.cfg
    if cfg.sse_peak_rate > 0:
        ctx.sse_peak_rate = cfg.sse_peak_rate
        env.log(f"SSE peak rate given: {cfg.sse_peak_rate:g} streams/s")
        return
    if "official" not in ctx.setups:
        ctx.sse_peak_why = "needs the official system (or --sse-peak-rate)"
        return
    scen = sse_peak_calibration(cfg)
    res = run_pass(ctx, "official", [scen], work, *ctx.setups["official"], 0)[scen.id]
    ctx.sse_peak_rate = peak_rate(cfg, res)
    if ctx.sse_peak_rate is None:
        ctx.sse_peak_why = f"finding the official's peak rate failed: {res.get('reason')}"[:400]
        return
    env.log(f"SSE peak rate of the official: {ctx.sse_peak_rate:.1f} streams/s")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds through run_pass, which stops its server


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    a = parse_args(argv)
    cfg = make_config(a)
    systems = [s for s in a.systems.split(",") if s]
    if unknown := set(systems) - set(SYSTEMS):
        print(f"bench: unknown systems {sorted(unknown)}", file=sys.stderr)
        return 2
    out_dir = Path(a.out or HERE / "results" / ("smoke" if a.smoke else "")).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if a.render:
        doc = json.loads(Path(a.render).read_text())
        print(report.render(doc, out_dir, env.ensure_matplotlib(), a.publish))
        return 0
    work = HERE / "work"
    work.mkdir(exist_ok=True)
    # One run at a time per checkout: work/ holds the built clients and
    # backends, which a second run would rebuild under the first.
    lock = open(work / ".lock", "w")  # noqa: SIM115 (held until exit)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        env.log(f"another bench run uses {work.relative_to(HERE.parent)}; waiting for it to end")
        fcntl.flock(lock, fcntl.LOCK_EX)
    scenarios = build(cfg)
    if a.only:
        prefixes = tuple(a.only.split(","))
        scenarios = [s for s in scenarios if s.id.startswith(prefixes)]

    began = time.monotonic()
    try:
        wrk = env.ensure_wrk()
        grpc_client = env.ensure_grpc_client(work)
        cfg.grpc_client = "c++" if grpc_client else "python"
        plots = env.ensure_matplotlib()
        setups: dict[str, tuple[Path, dict[str, str], list[str]]] = {}
        if "tritonpy" in systems:
            setups["tritonpy"] = (env.tritonpy_backend_dir(work), {}, [])
        if "official" in systems:
            bdir, benv = env.official_backend_dir(work)
            setups["official"] = (bdir, benv, list(env.OFFICIAL_ARGS))
        if "floor" in systems:
            setups["floor"] = (env.floor_backend_dir(work), {}, [])
    except (env.SetupError, OSError, Exception) as e:
        print(f"bench: set-up failed: {e}", file=sys.stderr)
        return 1
    env.log(f"set-up done in {time.monotonic() - began:.0f} s")

    scripts = work / "lua"
    scripts.mkdir(exist_ok=True)
    ctx = Context(cfg, wrk, scripts, grpc_client, setups=setups)
    if any(s.id == SSE_PEAK for s in scenarios):
        find_sse_peak(ctx, work)
    results: dict[str, dict[str, list[dict]]] = {s.id: {k: [] for k in systems} for s in scenarios}
    rounds_done = 0
    round_times: list[float] = []

    def write_all(publish: bool) -> str:
        return report.write_all(
            out_dir,
            cfg,
            scenarios,
            systems,
            results,
            rounds_done,
            time.monotonic() - began,
            plots,
            command=a.command,
            publish=publish,
            settings={s: list(setups[s][2]) for s in systems},
        )

    def round_estimate(round_no: int) -> float:
        """Seconds the next round should take: the longest each of its
        scenarios took so far, plus what the last round spent outside them
        (servers starting and stopping)."""
        scenario_s = {
            sid: max((x.get("seconds", 0.0) for x in runs), default=0.0)
            for sid, per in results.items()
            for runs in per.values()
        }
        last_outside = round_times[-1] - sum(
            results[sc.id][s][-1].get("seconds", 0.0)
            for sc in scenarios
            if sc.runs_in(round_no - 1)
            for s in systems
        )
        return last_outside + sum(
            scenario_s[sc.id] * len(systems) for sc in scenarios if sc.runs_in(round_no)
        )

    def finished_seconds(round_no: int) -> float:
        """Seconds spent in scenarios that do not run in round_no: the
        one-round ones (many stubs, shared weights, the field's tools) are
        measured once and do not eat the repeated rounds' budget."""
        return sum(
            x.get("seconds", 0.0)
            for sc in scenarios
            if not sc.runs_in(round_no)
            for s in systems
            for x in results[sc.id][s]
        )

    for r in range(cfg.rounds):
        elapsed = (time.monotonic() - began - finished_seconds(r + 1)) / 60
        if round_times and elapsed + round_estimate(r + 1) / 60 > cfg.budget_minutes:
            env.log(f"time budget ({cfg.budget_minutes} min) reached after {r} rounds")
            break
        t0 = time.monotonic()
        this_round = [sc for sc in scenarios if sc.runs_in(r + 1)]
        if not this_round:  # e.g. --only many_, which runs in fewer rounds
            break
        for system in systems:
            bdir, benv, bargs = setups[system]
            for sid, res in run_pass(
                ctx, system, this_round, work, bdir, benv, bargs, r + 1
            ).items():
                results[sid][system].append(res)
        round_times.append(time.monotonic() - t0)
        rounds_done += 1
        write_all(publish=False)

    doc = write_all(publish=a.publish)
    env.log(
        f"done in {(time.monotonic() - began) / 60:.1f} min: {out_dir}/bench.md, "
        f"bench.json"
        + (", docs/benchmarks.md, docs/benchmarks/bench.json, README.md" if a.publish else "")
    )
    print(doc)
    return 0 if rounds_done else 1


if __name__ == "__main__":
    sys.exit(main())
