# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What `make bench` publishes beside docs/benchmarks.md: the result file
the published figures are drawn from (docs/benchmarks/bench.json: the run's
aggregated results, without the per-round raw data), and every figure the
README and the other docs quote from it. Such a figure stands between two
HTML comments that name how it is rendered,
``<!-- bench:NAME -->text<!-- /bench -->`` (invisible once rendered), and
publishing writes ``FIGURES[NAME](doc)`` there. tests/unit/
test_bench_figures.py renders each again from the committed file and fails
when one does not match."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "docs" / "benchmarks" / "bench.json"
# The result file of the scenarios that start servers of their own
# (many_instances, many_models, shared_weights), run apart from `make
# bench` (report.SEPARATE) and published in a section of their own.
SEPARATE_RESULT = ROOT / "docs" / "benchmarks" / "separate.json"
# The pages whose figures are marked: the README and every docs page.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKED = re.compile(r"<!-- bench:(\w+) -->(.*?)<!-- /bench -->", re.DOTALL)

# The README's rows: a label, the cells it compares (scenario id, metric
# key; cells of one row joined by " / ", groups by "; "), and how the two
# columns read. "ratio": tritonpy over each system. "values": the ratio
# with the two figures beside it. "above_floor": what tritonpy adds above
# the floor's figure over what the official backend adds. "busy": the
# figures themselves, in percent. A row without "floor" leaves that
# column empty.
Cell = tuple[str, str]
ROWS: list[tuple[str, list[list[Cell]], str, bool]] = [
    (
        "`async def execute` awaiting 10 ms, 64 / 256 connections, req/s",
        [[("async_sleep_c64", "rps"), ("async_sleep_c256", "rps")]],
        "ratio",
        True,
    ),
    (
        "streaming (sync decoupled model), 64 / 256 streams, tokens/s",
        [[("stream_s64", "tok_s"), ("stream_s256", "tok_s")]],
        "ratio",
        True,
    ),
    (
        "streaming, time to first token p99, 64 / 256 streams",
        [[("stream_s64", "ttft_p99_ms"), ("stream_s256", "ttft_p99_ms")]],
        "ratio",
        True,
    ),
    *(
        (
            label,
            [[(f"stream_async_s{n}", key) for n in (64, 256, 1000)]],
            "ratio",
            True,
        )
        for label, key in (
            (
                "stream_async (`async def execute` decoupled), 64 / 256 / 1,000 streams, tokens/s",
                "tok_s",
            ),
            ("stream_async, time to first token p99, 64 / 256 / 1,000 streams", "ttft_p99_ms"),
            ("stream_async, CPU per token, 64 / 256 / 1,000 streams", "cpu_s_per_1k"),
        )
    ),
    (
        "llm ([examples/llm](examples/llm/model.py)), 1 / 16 / 64 / 256 streams, tokens/s",
        [[(f"llm_s{n}", "tok_s") for n in (1, 16, 64, 256)]],
        "ratio",
        True,
    ),
    (
        "llm, time to first token p99, 1 / 16 / 64 / 256 streams",
        [[(f"llm_s{n}", "ttft_p99_ms") for n in (1, 16, 64, 256)]],
        "ratio",
        True,
    ),
    ("llm, inter-token p50 at 1 stream", [[("llm_s1", "itl_p50_us")]], "values", True),
    (
        "llm, model busy share at 64 / 256 streams",
        [[("llm_s64", "busy_pct"), ("llm_s256", "busy_pct")]],
        "busy",
        True,
    ),
    (
        "add_sub over HTTP, 16 / 64 / 256 connections, req/s",
        [[(f"http_add_sub_c{n}", "rps") for n in (16, 64, 256)]],
        "ratio",
        True,
    ),
    (
        "add_sub over HTTP, CPU per request at 64 connections",
        [[("http_add_sub_c64", "cpu_s_per_1k")]],
        "ratio",
        True,
    ),
    (
        "add_sub over HTTP, 1 connection, p50 above the native floor's",
        [[("http_add_sub_c1", "p50_us")]],
        "above_floor",
        False,
    ),
    (
        "add_sub over gRPC, 16 / 64 connections, req/s",
        [[("grpc_add_sub_c16", "rps"), ("grpc_add_sub_c64", "rps")]],
        "ratio",
        True,
    ),
    (
        "BLS add_sub, 1 connection p50; 64 connections req/s",
        [[("bls_c1", "p50_us")], [("bls_c64", "rps")]],
        "ratio",
        False,
    ),
    (
        "dynamically batched identity, 64 connections, req/s",
        [[("batched_c64", "rps")]],
        "ratio",
        True,
    ),
    (
        "identity 16 MiB / 1 MiB, MiB/s",
        [[("identity_16MiB", "mib_s"), ("identity_1MiB", "mib_s")]],
        "ratio",
        True,
    ),
    (
        "model load time; stub RSS per instance",
        [[("load", "load_s")], [("load", "stub_rss_mib")]],
        "ratio",
        False,
    ),
]


def result_file(doc: dict) -> dict:
    """The run as published: its aggregated results, without each round's
    raw figures and the plots' samples (bench/results/bench.json has them)."""
    out = copy.deepcopy(doc)
    for sc in out["scenarios"]:
        sc.pop("rounds", None)
        for res in sc["results"].values():
            res.pop("samples", None)
    return out


def load_separate() -> dict | None:
    """The separate runs' result file; None before there is one."""
    return load(SEPARATE_RESULT) if SEPARATE_RESULT.exists() else None


def load(path: Path = RESULT) -> dict:
    doc: dict = json.loads(path.read_text())
    return doc


def times(r: float) -> str:
    return f"{r:.0f}x" if r >= 10 else f"{r:.2f}x"


def _num(value: float | None, spec: str, unit: str = "") -> str:
    # A figure a failed or skipped scenario did not give reads as a dash, so that
    # publishing a partial run still writes every page.
    return "–" if value is None else f"{value:{spec}}{unit}"


def _median(doc: dict, sid: str, key: str, system: str) -> float | None:
    sc = next((s for s in doc["scenarios"] if s["id"] == sid), None)
    if sc is None:
        return None
    m = sc["results"].get(system, {}).get("metrics", {}).get(key)
    return None if m is None else float(m["median"])


def _ratio(doc: dict, sid: str, key: str, other: str) -> float | None:
    sc = next((s for s in doc["scenarios"] if s["id"] == sid), None)
    r = None if sc is None else sc["ratios"].get(key, {}).get(f"tritonpy/{other}")
    return None if r is None else float(r)


def _ratios(doc: dict, groups: list[list[Cell]], other: str) -> str:
    parts = []
    for group in groups:
        got = [_ratio(doc, sid, key, other) for sid, key in group]
        parts.append(" / ".join("–" if r is None else times(r) for r in got))
    return "; ".join(parts)


def _cells(doc: dict, groups: list[list[Cell]], kind: str, floor: bool) -> tuple[str, str]:
    if kind == "ratio":
        return _ratios(doc, groups, "official"), _ratios(doc, groups, "floor") if floor else ""
    if kind in ("values", "above_floor"):
        ((sid, key),) = groups[0]
        tp, off, fl = (_median(doc, sid, key, s) for s in ("tritonpy", "official", "floor"))
    if kind == "values":
        return (
            f"{_ratios(doc, groups, 'official')} ({_num(tp, '.0f')} us vs {_num(off, '.0f')} us)",
            f"{_ratios(doc, groups, 'floor')} (floor {_num(fl, '.0f')} us)" if floor else "",
        )
    if kind == "above_floor":
        if tp is None or off is None or fl is None or off == fl:
            return "–", ""
        return f"{times((tp - fl) / (off - fl))} ({tp - fl:.0f} us vs {off - fl:.0f} us)", ""
    # "busy": the share itself, per cell of the group
    cells = [c for group in groups for c in group]

    def shares(system: str, digits: int) -> str:
        return " / ".join(_num(_median(doc, s, k, system), f".{digits}f", "%") for s, k in cells)

    return (
        f"{shares('tritonpy', 1)} (official {shares('official', 0)})",
        f"floor {shares('floor', 0)}" if floor else "",
    )


def readme_block(doc: dict) -> str:
    """The README's sentence naming the run and its table of ratios."""
    lines = [
        "",
        f"Ratios from the last full run ({doc['date']}, {doc['elapsed_s'] / 60:.1f} min, "
        f"{doc['rounds']} alternating round{'' if doc['rounds'] == 1 else 's'}; medians):",
        "",
        "| scenario | tritonpy / official | tritonpy / floor |",
        "|---|---|---|",
    ]
    for label, groups, kind, floor in ROWS:
        official, versus_floor = _cells(doc, groups, kind, floor)
        lines.append(f"| {label} | {official} | {versus_floor} |")
    return "\n".join(lines) + "\n"


def marked(text: str) -> list[tuple[str, str]]:
    """The (name, text) of every marked figure in ``text``."""
    return [(m.group(1), m.group(2)) for m in MARKED.finditer(text)]


def fill(text: str, doc: dict) -> str:
    """``text`` with every marked figure rendered from ``doc``."""

    def render(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in FIGURES:
            raise KeyError(f"no figure named {name!r} (bench/published.py FIGURES)")
        return f"<!-- bench:{name} -->{FIGURES[name](doc)}<!-- /bench -->"

    return MARKED.sub(render, text)


def publish(doc: dict, result: Path | None = None) -> None:
    """Writes the result file, then every marked figure of the pages."""
    result = result or RESULT
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(json.dumps(result_file(doc), indent=1) + "\n")
    for page in PAGES:
        text = page.read_text()
        filled = fill(text, doc)
        if filled != text:
            page.write_text(filled)


# ------------------------------------------------------------ the figures


def _step_rows(doc: dict) -> str:
    rows = ["", "| streams in the step | floor tokens/s | wall time per step |", "|---|---|---|"]
    for n in (1, 16, 64):
        tok_s = _median(doc, f"llm_s{n}", "tok_s", "floor")
        step = 1000 * n / tok_s if tok_s else None
        rows.append(f"| {n} | {_num(tok_s, ',.0f')} | {_num(step, '.2g', ' ms')} |")
    return "\n".join(rows) + "\n"


def _busy_range(doc: dict) -> str:
    got = [_median(doc, f"llm_s{n}", "busy_pct", "tritonpy") for n in (1, 16, 64, 256)]
    shares = [x for x in got if x is not None]
    return f"{min(shares):.0f}-{max(shares):.0f}%" if shares else "–"


def _per_1k_us(sid: str, system: str) -> Callable[[dict], str]:
    # CPU seconds per 1,000 requests (tokens) is milliseconds per 1,000,
    # microseconds per one.
    def render(doc: dict) -> str:
        cpu = _median(doc, sid, "cpu_s_per_1k", system)
        return _num(None if cpu is None else 1000 * cpu, ".0f", " µs")

    return render


def _budget_rows(doc: dict) -> str:
    rows = [
        "",
        "| system | CPU µs / request | req/s | p50 µs at 1 connection |",
        "|---|---|---|---|",
    ]
    for label, system in (
        ("floor (C++ in the server)", "floor"),
        ("tritonpy", "tritonpy"),
        ("official Python backend", "official"),
    ):
        cpu = _median(doc, "http_add_sub_c64", "cpu_s_per_1k", system)
        rps = _median(doc, "http_add_sub_c64", "rps", system)
        p50 = _median(doc, "http_add_sub_c1", "p50_us", system)
        cpu_us = None if cpu is None else 1000 * cpu
        rows.append(
            f"| {label} | {_num(cpu_us, '.0f')} | {_num(rps, ',.0f')} | {_num(p50, '.0f')} |"
        )
    return "\n".join(rows) + "\n"


def _sse_rows(doc: dict) -> str:
    """docs/llm-serving.md's table of what a token of stream_async costs
    over gRPC and over SSE."""
    rows = [
        "",
        "| streams | system | gRPC tokens/s | SSE tokens/s | gRPC server CPU µs/token "
        "| SSE server CPU µs/token | gRPC TTFT p50 | SSE TTFT p50 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in (64, 256):
        for system in ("tritonpy", "official"):
            ids = (f"stream_async_s{n}", f"sse_stream_async_s{n}")
            tok_s = [_median(doc, sid, "tok_s", system) for sid in ids]
            cpu = [_median(doc, sid, "cpu_s_per_1k", system) for sid in ids]
            ttft = [_median(doc, sid, "ttft_p50_ms", system) for sid in ids]
            cells = [_num(None if v is None else v / 1000, ".1f", "k") for v in tok_s]
            cells += [_num(None if v is None else 1000 * v, ".0f") for v in cpu]
            cells += [_num(v, ".0f", " ms") for v in ttft]
            rows.append(f"| {n} | {system} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def _sse_floor_errors(doc: dict) -> str:
    got = [_median(doc, f"sse_stream_async_s{n}", "errors", "floor") for n in (64, 256)]
    return " and ".join(_num(v, "g") for v in got)


def _above_floor(sid: str, key: str, system: str, scale: float) -> Callable[[dict], str]:
    def render(doc: dict) -> str:
        own, floor = (_median(doc, sid, key, s) for s in (system, "floor"))
        above = None if own is None or floor is None else scale * (own - floor)
        return _num(above, ".0f", " µs")

    return render


def _ratio_of(sid: str, key: str, other: str) -> Callable[[dict], str]:
    def render(doc: dict) -> str:
        r = _ratio(doc, sid, key, other)
        return "–" if r is None else times(r)

    return render


FIGURES: dict[str, Callable[[dict], str]] = {
    "readme_table": readme_block,
    "date": lambda doc: str(doc["date"]),
    "rounds": lambda doc: str(doc["rounds"]),
    "llm_steps": _step_rows,
    "llm_busy": _busy_range,
    "stream_async_256_ttft": lambda doc: _num(
        _median(doc, "stream_async_s256", "ttft_p50_ms", "tritonpy"), ".1f", " ms"
    ),
    "stream_async_1000_ttft": lambda doc: _num(
        _median(doc, "stream_async_s1000", "ttft_p50_ms", "tritonpy"), ".0f", " ms"
    ),
    "stream_async_256_cpu": _per_1k_us("stream_async_s256", "tritonpy"),
    "stream_async_256_floor_cpu": _per_1k_us("stream_async_s256", "floor"),
    "add_sub_budget": _budget_rows,
    "sse_costs": _sse_rows,
    "sse_floor_errors": _sse_floor_errors,
    "http_cpu_above_floor": _above_floor("http_add_sub_c64", "cpu_s_per_1k", "tritonpy", 1000),
    "official_cpu_above_floor": _above_floor("http_add_sub_c64", "cpu_s_per_1k", "official", 1000),
    "http_p50_above_floor": _above_floor("http_add_sub_c1", "p50_us", "tritonpy", 1),
    "official_p50_above_floor": _above_floor("http_add_sub_c1", "p50_us", "official", 1),
    "grpc_64_official": _ratio_of("grpc_add_sub_c64", "rps", "official"),
    "grpc_64_floor": _ratio_of("grpc_add_sub_c64", "rps", "floor"),
    "http_64_floor": _ratio_of("http_add_sub_c64", "rps", "floor"),
    "identity_16_floor": _ratio_of("identity_16MiB", "mib_s", "floor"),
    "identity_16_official": _ratio_of("identity_16MiB", "mib_s", "official"),
}
