# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The scenarios: what each one sends, with which load generator, and which
metrics it reports. To add one, append a Scenario in ``build``; the runner,
the table, the JSON and the smoke test pick it up."""

from __future__ import annotations

import re
import statistics
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench import loads
from bench.models import ADD_SUB_INPUTS, BATCHED_INPUT, FLOOR_MISSING, VEC_INPUT
from tritonpy._testbase.server import Server, rss_bytes

MiB = 1 << 20


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    better: str  # "higher" or "lower": how to read the ratio columns


@dataclass
class Config:
    rounds: int = 3
    duration: float = 3.0
    warmup: float = 1.0
    conns: tuple[int, ...] = (16, 64, 256)
    grpc_procs: int = 2
    identity_sizes: tuple[int, ...] = (1 << 10, 1 << 20, 16 << 20)
    identity_conns: int = 4
    batched_conns: int = 64
    async_conns: tuple[int, ...] = (64, 256)
    # A serialised 10 ms model at 256 connections has ~2.6 s of queue: the
    # window must be several times that, and a warm-up would only leave a
    # backlog behind for the measured run.
    async_duration: float = 8.0
    streams: tuple[int, ...] = (64, 256)
    tokens: int = 100
    # stream_async: streams from an ``async def execute`` that yields to
    # the loop after each token. Fewer tokens than ``stream``: TTFT counts
    # requests sent in the window, and at 1,000 streams the official
    # backend's first requests take longer than a window of 100 tokens
    # each to end.
    async_streams: tuple[int, ...] = (64, 256, 1000)
    async_tokens: int = 32
    # stream_async over HTTP server-sent events (generate_stream), every
    # token checked (bench/sse_load.py); same model and tokens as above.
    sse_streams: tuple[int, ...] = (64, 256)
    # llm: the llm example, 64 new tokens after a 32-byte prompt. A stream
    # at 256 waits about three batches of 64 streams for its first token:
    # the window must hold several of those.
    llm_streams: tuple[int, ...] = (1, 16, 64, 256)
    llm_tokens: int = 64
    llm_duration: float = 3.0
    llm_warmup: float = 1.0
    # stream_async and llm take ~2.4 min a round for the three systems:
    # they run in the first two rounds only, so that make bench keeps three
    # rounds of the rest within 20 min on 2 cores.
    streaming_rounds: int = 2
    bls_conns: tuple[int, ...] = (1, 64)
    # The field's own load generators (bench/field.py), closed loop and
    # open loop: perf_analyzer on add_sub (connections; requests/s), and
    # genai-perf on the engine model at one stream (vllm_backend's
    # pattern) and on the llm example (streams; requests/s).
    pa_conns: tuple[int, ...] = (1, 64)
    pa_rates: tuple[float, ...] = (1000.0,)
    genai_engine_streams: tuple[int, ...] = (1,)
    genai_llm_streams: tuple[int, ...] = (16,)
    genai_llm_rates: tuple[float, ...] = (8.0,)
    field_window_ms: int = 3000
    # They add ~4.5 min a round for the three systems (genai-perf starts
    # slowly): one round, so that make bench stays within its budget.
    field_rounds: int = 1
    # SSE open loop: new streams/s of stream_async, at about the official
    # backend's peak (its closed loop at 256 streams ends ~180 streams/s).
    sse_rates: tuple[float, ...] = (180.0,)
    # SSE open loop at the official's peak rate: the streams/s the official
    # backend completes in closed loop at sse_peak_streams streams, measured
    # once before the first round (or given: sse_peak_rate > 0), offered to
    # every system.
    sse_peak_streams: int = 256
    sse_peak_rate: float = 0.0
    load_repeats: int = 3
    # sandboxed_start: load and unload cycles of each model.
    start_repeats: int = 10
    # Minutes of the repeated rounds; scenarios that run in fewer rounds
    # (many stubs, shared weights, the field's tools) are not counted.
    budget_minutes: float = 35.0
    # many_instances / many_models (bench/many.py): how many stubs, what
    # the model imports, and the rounds they run in (each run starts a
    # server of its own and loads up to 128 stubs: minutes a round).
    many_sizes: tuple[int, ...] = (16, 64, 128)
    many_framework: str = "torch"
    many_rounds: int = 1
    # shared_weights (bench/shared_weights.py): instances of the model of
    # 1 GiB of weights, and the requests answered before PSS is read again.
    shared_sizes: tuple[int, ...] = (1, 4, 16)
    shared_requests: int = 10_000
    shared_mib: int = 1024
    # Which gRPC load generator ran: "c++" (bench/grpc_load.cc) or
    # "python" (bench/grpc_load.py, where the C++ one cannot be built).
    grpc_client: str = "python"


@dataclass
class Context:
    cfg: Config
    wrk: str
    scripts: Path
    grpc_client: str | None = None  # the C++ load generator's path
    # system -> (backend directory, environment, tritonserver arguments),
    # for the scenarios that start servers of their own.
    setups: dict[str, tuple[Path, dict[str, str], list[str]]] = field(default_factory=dict)
    # The official's peak SSE rate (streams/s) of this run, once known
    # (sse_peak_scenarios), or why it is not.
    sse_peak_rate: float | None = None
    sse_peak_why: str = "the official's peak rate was not measured"


@dataclass
class Scenario:
    id: str
    group: str
    title: str
    model: str
    metrics: list[Metric]
    run: Callable[[Context, Server], dict]
    # An HTTP request proving the model answers (None: readiness only).
    probe: loads.HttpBody | None = None
    extra: dict = field(default_factory=dict)
    # The floor's measurement where it is not a model of the floor server
    # (llm: the model and batcher in one process, no server).
    floor: Callable[[Context], dict] | None = None
    # The most rounds it runs in (None: every round): the suite's time
    # budget buys fewer rounds of the long scenarios.
    rounds: int | None = None
    # A scenario that starts servers of its own (the system's server idles
    # meanwhile): called with the system's name instead of ``run``.
    own: Callable[[str, Context], dict] | None = None
    # The systems it runs on (None: all).
    systems: tuple[str, ...] | None = None

    def runs_in(self, round_no: int) -> bool:
        return self.rounds is None or round_no <= self.rounds

    def applies_to(self, system: str) -> bool:
        if self.systems is not None and system not in self.systems:
            return False
        return not (system == "floor" and self.model in FLOOR_MISSING and self.floor is None)


LAT = [
    Metric("p50_us", "p50 (us)", "lower"),
    Metric("p90_us", "p90 (us)", "lower"),
    Metric("p99_us", "p99 (us)", "lower"),
]
CPU = Metric("cpu_s_per_1k", "CPU s / 1k req", "lower")
TPUT = [Metric("rps", "req/s", "higher"), CPU]


def _size_label(n: int) -> str:
    return f"{n >> 20} MiB" if n >= MiB else f"{n >> 10} KiB"


def _wrk(
    body: loads.HttpBody, conns: int, name: str, slow: bool = False
) -> Callable[[Context, Server], dict]:
    def run(ctx: Context, server: Server) -> dict:
        script = loads.wrk_script(body, ctx.scripts / f"{name}.lua")
        duration, warmup = ctx.cfg.duration, ctx.cfg.warmup
        if slow:
            duration, warmup = max(duration, ctx.cfg.async_duration), 0.0
        return loads.run_wrk(
            ctx.wrk, server, script, body.path, conns=conns, duration=duration, warmup=warmup
        )

    return run


CPU_TOKENS = Metric("cpu_s_per_1k", "CPU s / 1k tokens", "lower")
STREAM_METRICS = [
    Metric("tok_s", "tokens/s", "higher"),
    Metric("ttft_p50_ms", "TTFT p50 (ms)", "lower"),
    Metric("ttft_p99_ms", "TTFT p99 (ms)", "lower"),
    Metric("itl_p50_us", "inter-token p50 (us)", "lower"),
    Metric("itl_p99_us", "inter-token p99 (us)", "lower"),
    CPU_TOKENS,
]
BUSY = Metric("busy_pct", "model busy (% of wall)", "higher")
# The llm example's counter of seconds spent in decode steps.
STEP_SECONDS = "llm_step_seconds_total"


def _grpc(
    mode: str, model: str, conns: int, tokens: Callable[[Config], int] | None = None
) -> Callable[[Context, Server], dict]:
    def run(ctx: Context, server: Server) -> dict:
        procs = 1 if conns == 1 else ctx.cfg.grpc_procs
        return loads.run_grpc(
            server,
            mode=mode,
            model=model,
            conns=conns,
            duration=ctx.cfg.duration,
            warmup=ctx.cfg.warmup,
            procs=procs,
            tokens=tokens(ctx.cfg) if tokens else ctx.cfg.tokens,
            client=ctx.grpc_client,
            payloads=ctx.scripts.parent,  # the work directory
        )

    return run


def _sse(model: str, conns: int) -> Callable[[Context, Server], dict]:
    def run(ctx: Context, server: Server) -> dict:
        return loads.run_sse(
            server,
            model=model,
            conns=conns,
            duration=ctx.cfg.duration,
            warmup=ctx.cfg.warmup,
            procs=ctx.cfg.grpc_procs,
            tokens=ctx.cfg.async_tokens,
        )

    return run


def _sse_rate(model: str, rate: float) -> Callable[[Context, Server], dict]:
    def run(ctx: Context, server: Server) -> dict:
        return loads.run_sse(
            server,
            model=model,
            conns=max(ctx.cfg.sse_streams, default=256) * 4,
            duration=ctx.cfg.duration,
            warmup=ctx.cfg.warmup,
            procs=ctx.cfg.grpc_procs,
            tokens=ctx.cfg.async_tokens,
            rate=rate,
        )

    return run


def _sse_peak(model: str) -> Callable[[Context, Server], dict]:
    def run(ctx: Context, server: Server) -> dict:
        if not ctx.sse_peak_rate:
            return {"skipped": ctx.sse_peak_why}
        r = _sse_rate(model, ctx.sse_peak_rate)(ctx, server)
        r["rate"] = ctx.sse_peak_rate
        return r

    return run


SSE_PEAK = "sse_stream_async_peak"
# What an SSE open loop reports.
SSE_OPEN_METRICS = [
    *STREAM_METRICS,
    Metric("errors", "streams wrong", "lower"),
    Metric("late", "arrivals held by the client's bound", "lower"),
]


def sse_peak_calibration(cfg: Config) -> Scenario:
    """The closed-loop run that finds the official's peak SSE rate: its
    tokens/s over the tokens of a stream are the streams/s it completes."""
    n = cfg.sse_peak_streams
    return Scenario(
        f"{SSE_PEAK}_find",
        "the official's peak SSE rate, closed loop",
        f"SSE stream_async {n} streams (finding the peak rate)",
        "stream_async",
        STREAM_METRICS,
        _sse("stream_async", n),
    )


def peak_rate(cfg: Config, calibration: dict) -> float | None:
    """Streams/s of a calibration result (sse_peak_calibration)."""
    tok_s = (calibration.get("metrics") or {}).get("tok_s")
    return tok_s / cfg.async_tokens if tok_s else None


def _field(tool: str, model: str, **load: float) -> Callable[[Context, Server], dict]:
    """perf_analyzer or genai-perf (bench/field.py) on ``model``; skipped
    while they are not installed."""

    def run(ctx: Context, server: Server) -> dict:
        from bench import field

        if (why := field.available()) is not None:
            return {"skipped": why}
        work = ctx.scripts.parent
        offered = field.Load(model, window_ms=ctx.cfg.field_window_ms, **load)  # type: ignore[arg-type]
        if tool == "perf_analyzer":
            return field.run_perf_analyzer(server, work, offered)
        return field.run_genai_perf(server, work, offered, tokens=ctx.cfg.llm_tokens)

    return run


def _load_label(load: dict) -> tuple[str, str]:
    """(id suffix, title) of a closed (concurrency) or open (rate) load."""
    if "rate" in load:
        return f"r{load['rate']:g}", f"{load['rate']:g} req/s"
    return f"c{load['concurrency']}", f"@{load['concurrency']}"


def field_scenarios(cfg: Config) -> list[Scenario]:
    """pa_* (perf_analyzer) and genai_* (genai-perf), bench/field.py."""
    pa = [{"concurrency": c} for c in cfg.pa_conns] + [{"rate": r} for r in cfg.pa_rates]
    out = []
    for load in pa:
        suffix, title = _load_label(load)
        out.append(
            Scenario(
                f"pa_add_sub_{suffix}",
                "add_sub by perf_analyzer (gRPC)",
                f"perf_analyzer add_sub {title}",
                "add_sub",
                [Metric("rps", "req/s", "higher"), *LAT],
                _field("perf_analyzer", "add_sub", **load),
                rounds=cfg.field_rounds,
            )
        )
    # A load is {"concurrency": streams} or {"rate": requests per second}.
    genai: list[tuple[str, dict[str, float]]]
    genai = [("engine", {"concurrency": c}) for c in cfg.genai_engine_streams]
    genai += [("llm", {"concurrency": c}) for c in cfg.genai_llm_streams]
    genai += [("llm", {"rate": r}) for r in cfg.genai_llm_rates]
    for model, load in genai:
        suffix, title = _load_label(load)
        what = {
            "engine": "a stand-in engine of 2.0 ms a step, sending from its own thread",
            "llm": "the llm example",
        }[model]
        out.append(
            Scenario(
                f"genai_{model}_{suffix}",
                f"genai-perf, gRPC streaming, --backend vllm: {what}",
                f"genai-perf {model} {title}",
                model,
                [m for m in STREAM_METRICS if m is not CPU_TOKENS],
                _field("genai-perf", model, **load),
                rounds=cfg.field_rounds,
                systems=("tritonpy", "official"),
            )
        )
    return out


def _step_seconds(server: Server) -> float:
    """The llm model's busy seconds so far, from Triton's metrics."""
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10
        ) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    m = re.search(rf"^{STEP_SECONDS}{{[^}}]*}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def _llm(conns: int) -> Callable[[Context, Server], dict]:
    def run(ctx: Context, server: Server) -> dict:
        from bench import grpc_load
        from bench.llm_floor import PROMPT

        cfg = ctx.cfg
        marks: dict[str, float] = {}
        r = loads.run_grpc(
            server,
            mode="stream",
            model="llm",
            conns=conns,
            duration=cfg.llm_duration,
            warmup=cfg.llm_warmup,
            procs=1,
            tokens=cfg.llm_tokens,
            client=ctx.grpc_client,
            payloads=ctx.scripts.parent,
            on_window=lambda phase: marks.__setitem__(phase, _step_seconds(server)),
            payload=grpc_load.llm_request("llm", PROMPT, cfg.llm_tokens),
        )
        r["busy_pct"] = 100.0 * (marks["end"] - marks["start"]) / cfg.llm_duration
        return r

    return run


def _llm_floor(conns: int) -> Callable[[Context], dict]:
    def run(ctx: Context) -> dict:
        cfg = ctx.cfg
        r = loads.run_llm_floor(
            conns=conns, tokens=cfg.llm_tokens, duration=cfg.llm_duration, warmup=cfg.llm_warmup
        )
        r["busy_pct"] = 100.0 * r["busy_s"] / cfg.llm_duration
        return r

    return run


def _with_batches(inner: Callable[[Context, Server], dict], model: str):
    def run(ctx: Context, server: Server) -> dict:
        before = server.stats(model)
        r = inner(ctx, server)
        after = server.stats(model)
        try:
            n = int(after["inference_count"]) - int(before["inference_count"])
            e = int(after["execution_count"]) - int(before["execution_count"])
            r["avg_batch"] = n / e if e else None
        except (KeyError, TypeError):
            r["avg_batch"] = None
        return r

    return run


def _with_mib_s(inner: Callable[[Context, Server], dict], nbytes: int):
    def run(ctx: Context, server: Server) -> dict:
        r = inner(ctx, server)
        r["mib_s"] = r["rps"] * nbytes / MiB
        return r

    return run


def _load_once(server: Server, model: str) -> tuple[float, float | None] | str:
    """Loads ``model``, then unloads it and waits until its stubs are
    gone: (seconds the load took, the mean RSS in MiB of the stubs it
    started, read while loaded: None if it started none), or the error."""
    before = set(server.stubs())
    t0 = time.monotonic()
    code, body = server.request("POST", f"/v2/repository/models/{model}/load", b"")
    elapsed = time.monotonic() - t0
    if code != 200:
        return body.decode(errors="replace")[:300]
    new = set(server.stubs()) - before
    rss = sum(rss_bytes(p) for p in new) / len(new) / MiB if new else None
    unloaded = f"successfully unloaded '{model}'"
    done = server.log().count(unloaded)
    server.request("POST", f"/v2/repository/models/{model}/unload", b"")
    # Triton's model deleter runs on after the unload's answer; the next
    # load must not overlap it (2.51 has crashed there): wait for its line.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        server.log().count(unloaded) <= done or set(server.stubs()) - before
    ):
        time.sleep(0.05)
    return elapsed, rss


def _load_time(ctx: Context, server: Server) -> dict:
    """Load load_probe (one instance) ``load_repeats`` times: seconds per
    load, and the RSS of the stub process it starts."""
    times, rss = [], []
    for _ in range(ctx.cfg.load_repeats):
        once = _load_once(server, "load_probe")
        if isinstance(once, str):
            return {"ok": 0, "error": once}
        times.append(once[0])
        if once[1] is not None:
            rss.append(once[1])
    times.sort()
    return {
        "ok": len(times),
        "load_s": times[len(times) // 2],
        "stub_rss_mib": sorted(rss)[len(rss) // 2] if rss else None,
        "start_s": server.ready_s,
    }


START = [
    Metric("load_ms", "add_sub load to ready (ms)", "lower"),
    Metric("sandboxed_load_ms", "the same, stub-sandbox=true (ms; others: no sandbox)", "lower"),
    Metric("sandbox_ratio", "sandboxed / unsandboxed", "lower"),
]


def _sandboxed_start(ctx: Context, server: Server) -> dict:
    """Load-to-ready of add_sub (one instance) with and without the stub
    sandbox, ``start_repeats`` load and unload cycles each, alternating;
    medians. The first cycle of each starts what later loads reuse (the
    stub templates) and is not counted. The official backend and the
    floor have no sandbox: their one time stands in both columns, so that
    the ratio columns compare each of tritonpy's with it."""
    models = ["load_probe"]
    if "load_probe_sandboxed" in server.model_states():
        models.append("load_probe_sandboxed")
    times: dict[str, list[float]] = {m: [] for m in models}
    for cycle in range(ctx.cfg.start_repeats + 1):
        for model in models:
            once = _load_once(server, model)
            if isinstance(once, str):
                return {"ok": 0, "error": f"{model}: {once}"}
            if cycle:
                times[model].append(once[0] * 1000)
    plain = statistics.median(times["load_probe"])
    boxed = statistics.median(times.get("load_probe_sandboxed") or times["load_probe"])
    return {
        "ok": ctx.cfg.start_repeats,
        "load_ms": plain,
        "sandboxed_load_ms": boxed,
        "sandbox_ratio": boxed / plain if len(models) == 2 else None,
    }


MANY = [
    Metric("pss_mib", "PSS of all stubs (MiB)", "lower"),
    Metric("server_rss_mib", "server RSS (MiB)", "lower"),
    Metric("load_s", "load to ready (s)", "lower"),
    Metric("rps", "add_sub req/s through all", "higher"),
]


def _own(run: Callable[..., dict], variant: str, **kw: object) -> Callable[[str, Context], dict]:
    """A scenario with servers of its own: ``run(setup, **kw)`` of bench/
    many.py or bench/shared_weights.py, with the system's set-up."""

    def own(system: str, ctx: Context) -> dict:
        from bench import many

        backends, env, args = ctx.setups[system]
        setup = many.Setup(
            system,
            variant if system == "tritonpy" else "",
            ctx.scripts.parent,
            backends,
            env,
            args,
            ctx.wrk,
            ctx.scripts,
            ctx.cfg.duration,
            ctx.cfg.warmup,
        )
        return run(setup, **kw)

    return own


# tritonpy with stub templates (stub-fork=true) against the official
# backend, and tritonpy starting each stub afresh (stub-fork=false).
VARIANTS = (("fork", "", ("tritonpy", "official")), ("exec", "_exec", ("tritonpy",)))


def _own_scenarios(
    cfg: Config,
    what: str,
    group: str,
    model: str,
    metrics: list[Metric],
    sizes: tuple[int, ...],
    run: Callable[..., dict],
    variants: tuple[tuple[str, str, tuple[str, ...]], ...] = VARIANTS,
    **kw: object,
) -> list[Scenario]:
    """<what><suffix>_n<N> for each size and variant (VARIANTS)."""
    return [
        Scenario(
            f"{what}{suffix}_n{n}",
            group,
            f"{what} {n}" + (", stub-fork=false" if suffix else ""),
            model,
            metrics,
            _no_shared_server,
            own=_own(run, variant, n=n, **kw),
            systems=systems,
            rounds=cfg.many_rounds,
        )
        for n in sizes
        for variant, suffix, systems in variants
    ]


def many_scenarios(cfg: Config) -> list[Scenario]:
    """many_instances_n<N>, many_models_n<N> and many_groups_n<N>
    (bench/many.py)."""
    from bench import many

    what = {
        "instances": "one model, N instances",
        "models": "N models, 1 instance each",
        "groups": f"N / {many.GROUP} models, {many.GROUP} instances each",
    }
    return [
        sc
        for kind in ("instances", "models", "groups")
        for sc in _own_scenarios(
            cfg,
            f"many_{kind}",
            f"many stubs: {what[kind]} importing {cfg.many_framework}",
            "many",
            MANY,
            cfg.many_sizes,
            many.run,
            # Exec'd, N / 4 models of 4 instances start as N models of one.
            variants=VARIANTS[:1] if kind == "groups" else VARIANTS,
            kind=kind,
            framework=cfg.many_framework,
        )
    ]


SHARED = [
    Metric("pss_mib", "PSS of all stubs, loaded (MiB)", "lower"),
    Metric("load_s", "load to ready (s)", "lower"),
    Metric("rps", "add_sub req/s through all", "higher"),
    Metric("pss_after_mib", "PSS of all stubs after the requests (MiB)", "lower"),
    Metric("answered", "requests answered before the second PSS", "higher"),
    Metric("errors", "requests failed", "lower"),
]


def shared_scenarios(cfg: Config) -> list[Scenario]:
    """shared_weights_n<N>: the model of 1 GiB of weights loaded in
    initialize_shared (bench/shared_weights.py)."""
    from bench import shared_weights

    return _own_scenarios(
        cfg,
        "shared_weights",
        f"{cfg.shared_mib} MiB of weights loaded in initialize_shared",
        "shared",
        SHARED,
        cfg.shared_sizes,
        shared_weights.run,
        requests=cfg.shared_requests,
        mib=cfg.shared_mib,
    )


def _no_shared_server(ctx: Context, server: Server) -> dict:
    raise AssertionError("many_* and shared_weights scenarios start servers of their own")


def build(cfg: Config) -> list[Scenario]:
    add_sub = loads.json_body("add_sub", ADD_SUB_INPUTS)
    out: list[Scenario] = []
    for c in (1, *cfg.conns):
        out.append(
            Scenario(
                f"http_add_sub_c{c}",
                "add_sub over HTTP (wrk, JSON)",
                f"HTTP add_sub @{c}",
                "add_sub",
                LAT if c == 1 else TPUT,
                _wrk(add_sub, c, f"add_sub_c{c}"),
                add_sub,
            )
        )
    for c in (1, *cfg.conns):
        out.append(
            Scenario(
                f"grpc_add_sub_c{c}",
                "add_sub over gRPC",
                f"gRPC add_sub @{c}",
                "add_sub",
                LAT if c == 1 else TPUT,
                _grpc("unary", "add_sub", c),
                add_sub,
            )
        )
    for n in cfg.identity_sizes:
        body = loads.binary_body("identity", n)
        out.append(
            Scenario(
                f"identity_{_size_label(n).replace(' ', '')}",
                f"identity, binary tensor data over HTTP @{cfg.identity_conns}",
                f"identity {_size_label(n)}",
                "identity",
                [Metric("mib_s", "MiB/s each way", "higher"), CPU],
                _with_mib_s(_wrk(body, cfg.identity_conns, f"identity_{n}"), n),
                body,
            )
        )
    batched = loads.json_body("batched", BATCHED_INPUT)
    out.append(
        Scenario(
            f"batched_c{cfg.batched_conns}",
            "dynamic batching (HTTP)",
            f"batched identity @{cfg.batched_conns}",
            "batched",
            [*TPUT, Metric("avg_batch", "avg batch", "higher")],
            _with_batches(_wrk(batched, cfg.batched_conns, "batched"), "batched"),
            batched,
        )
    )
    sleepy = loads.json_body("async_sleep", VEC_INPUT)
    for c in cfg.async_conns:
        out.append(
            Scenario(
                f"async_sleep_c{c}",
                "async def execute awaiting 10 ms (HTTP)",
                f"async 10 ms @{c}",
                "async_sleep",
                TPUT,
                _wrk(sleepy, c, f"async_c{c}", slow=True),
                sleepy,
            )
        )
    for n in cfg.streams:
        out.append(
            Scenario(
                f"stream_s{n}",
                f"decoupled streaming, gRPC streams x {cfg.tokens} tokens",
                f"stream {n} streams",
                "stream",
                STREAM_METRICS,
                _grpc("stream", "stream", n),
            )
        )
    for n in cfg.async_streams:
        out.append(
            Scenario(
                f"stream_async_s{n}",
                f"async decoupled streaming, gRPC streams x {cfg.async_tokens} tokens",
                f"stream_async {n} streams",
                "stream_async",
                STREAM_METRICS,
                _grpc("stream", "stream_async", n, lambda c: c.async_tokens),
                rounds=cfg.streaming_rounds,
            )
        )
    for n in cfg.sse_streams:
        out.append(
            Scenario(
                f"sse_stream_async_s{n}",
                f"async decoupled streaming, HTTP SSE (generate_stream) x {cfg.async_tokens} tokens",
                f"SSE stream_async {n} streams",
                "stream_async",
                [*STREAM_METRICS, Metric("errors", "streams wrong", "lower")],
                _sse("stream_async", n),
                rounds=cfg.streaming_rounds,
            )
        )
    for rate in cfg.sse_rates:
        out.append(
            Scenario(
                f"sse_stream_async_r{rate:g}",
                f"async decoupled streaming, HTTP SSE (generate_stream) x {cfg.async_tokens} "
                "tokens, open loop",
                f"SSE stream_async {rate:g} streams/s",
                "stream_async",
                SSE_OPEN_METRICS,
                _sse_rate("stream_async", rate),
                rounds=cfg.streaming_rounds,
            )
        )
    out.append(
        Scenario(
            SSE_PEAK,
            f"async decoupled streaming, HTTP SSE (generate_stream) x {cfg.async_tokens} "
            "tokens, open loop at the official's peak rate",
            "SSE stream_async at the official's peak streams/s",
            "stream_async",
            [*SSE_OPEN_METRICS, Metric("rate", "streams/s offered", "higher")],
            _sse_peak("stream_async"),
            rounds=cfg.streaming_rounds,
        )
    )
    for n in cfg.llm_streams:
        out.append(
            Scenario(
                f"llm_s{n}",
                f"llm example, gRPC streams x {cfg.llm_tokens} tokens after 32 bytes",
                f"llm {n} streams",
                "llm",
                [*STREAM_METRICS, BUSY],
                _llm(n),
                floor=_llm_floor(n),
                rounds=cfg.streaming_rounds,
            )
        )
    bls = loads.json_body("bls", ADD_SUB_INPUTS)
    for c in cfg.bls_conns:
        out.append(
            Scenario(
                f"bls_c{c}",
                "BLS: a model calling add_sub (HTTP)",
                f"BLS add_sub @{c}",
                "bls",
                [LAT[0], LAT[2]] if c == 1 else TPUT,
                _wrk(bls, c, f"bls_c{c}"),
                bls,
            )
        )
    out.extend(field_scenarios(cfg))
    # Before "load", which stays last (tests/unit/test_bench_figures.py).
    out.append(
        Scenario(
            "sandboxed_start",
            "stub start under the sandbox",
            "add_sub load, sandboxed and not",
            "add_sub",
            START,
            _sandboxed_start,
        )
    )
    out.extend(many_scenarios(cfg))
    out.extend(shared_scenarios(cfg))
    out.append(
        Scenario(
            "load",
            "model load and memory",
            "load_probe (1 instance)",
            "add_sub",
            [
                Metric("load_s", "model load (s)", "lower"),
                Metric("stub_rss_mib", "stub RSS / instance (MiB)", "lower"),
                Metric("start_s", "server start to ready (s)", "lower"),
            ],
            _load_time,
        )
    )
    return out
