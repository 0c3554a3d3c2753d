# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Aggregation (medians with min/max over rounds, ratios) and the outputs:
bench.json, bench.md, PNG plots, and optionally docs/benchmarks.md with
the result file it is drawn from and the README's table (bench.published)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
from pathlib import Path
from typing import Any

from bench import hops, paths, published
from bench.environment import OFFICIAL_ARGS
from bench.scenarios import Config, Scenario

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DEFAULT_COMMAND = "make bench"
SATURATION_MARK = "†"
MACHINE_MARK = "‡"


def machine() -> dict:
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / (1 << 20), 1)
                break
    except OSError:
        pass
    from tritonpy import install as inst

    try:
        site = inst.tritonserver().resolve().parents[3]
        dist = next(site.glob("nvidia_pytriton-*.dist-info"), None)
        if dist:
            info["server"] = f"tritonserver from {dist.name.removesuffix('.dist-info')}"
    except Exception:
        pass
    from bench import wakeup

    try:
        # what one wake-up of a sleeping process costs here: latencies at one
        # client are mostly made of them
        info["wakeup_round_trip_us"] = wakeup.measure()
    except OSError:
        pass
    return info


def aggregate(scen: Scenario, runs: list[dict]) -> dict:
    ok = [r for r in runs if r.get("status") == "ok"]
    if not ok:
        first = runs[0] if runs else {"status": "missing", "reason": "not run"}
        return {"status": first["status"], "reason": first.get("reason", "")}
    metrics = {}
    for m in scen.metrics:
        values = [r["metrics"][m.key] for r in ok if r["metrics"].get(m.key) is not None]
        if values:
            metrics[m.key] = {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
                "n": len(values),
            }
    out = {
        "status": "ok",
        "metrics": metrics,
        "client_saturated": any(r.get("client_saturated") for r in ok),
        "machine_saturated": any(r.get("machine_saturated") for r in ok),
        "client_cores_max": max((r.get("client_cores") or 0.0) for r in ok),
        "errors": sum(r.get("errors", 0) for r in ok),
    }
    extra = {}
    for key in ("p50_us", "p99_us", "rps"):
        values = [r["extra"][key] for r in ok if r.get("extra", {}).get(key) is not None]
        if values:
            extra[key] = statistics.median(values)
    if extra:
        out["extra"] = extra
    samples = [r["samples"] for r in ok if "samples" in r]
    if samples:
        out["samples"] = samples[-1]
    return out


def build_doc(
    cfg: Config,
    scenarios: list[Scenario],
    systems: list[str],
    results: dict[str, dict[str, list[dict]]],
    rounds: int,
    elapsed: float,
    command: str | None,
    settings: dict[str, list[str]] | None = None,
) -> dict:
    doc: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "command": command or DEFAULT_COMMAND,
        "config": dataclasses.asdict(cfg),
        "rounds": rounds,
        "elapsed_s": round(elapsed),
        "systems": systems,
        # tritonserver arguments each system gets beyond the common ones
        "settings": settings or {},
        "scenarios": [],
    }
    for scen in scenarios:
        per = {s: aggregate(scen, results[scen.id].get(s, [])) for s in systems}
        ratios: dict[str, dict[str, float]] = {}
        for m in scen.metrics:
            tp = per.get("tritonpy", {}).get("metrics", {}).get(m.key)
            for other in ("official", "floor"):
                ref = per.get(other, {}).get("metrics", {}).get(m.key)
                if tp and ref and ref["median"]:
                    ratios.setdefault(m.key, {})[f"tritonpy/{other}"] = tp["median"] / ref["median"]
        doc["scenarios"].append(
            {
                "id": scen.id,
                "group": scen.group,
                "title": scen.title,
                "model": scen.model,
                "metrics": [dataclasses.asdict(m) for m in scen.metrics],
                "results": per,
                "ratios": ratios,
                "rounds": {
                    s: [
                        {k: v for k, v in r.items() if k != "samples"}
                        for r in results[scen.id].get(s, [])
                    ]
                    for s in systems
                },
            }
        )
    return doc


def fmt(x: float | None) -> str:
    if x is None:
        return "–"
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def cell(res: dict, key: str) -> str:
    if res.get("status") != "ok":
        return res.get("status", "–")
    m = res["metrics"].get(key)
    if m is None:
        return "–"
    text = fmt(m["median"])
    if m["n"] > 1:
        text += f" ({fmt(m['min'])}–{fmt(m['max'])})"
    if res.get("client_saturated"):
        text += SATURATION_MARK
    elif res.get("machine_saturated"):
        text += MACHINE_MARK
    return text


def table(doc: dict) -> str:
    systems = doc["systems"]
    head = ["scenario", "metric", *systems]
    if "tritonpy" in systems:
        head += [f"tritonpy/{o}" for o in ("official", "floor") if o in systems]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for sc in doc["scenarios"]:
        for i, m in enumerate(sc["metrics"]):
            arrow = "↑" if m["better"] == "higher" else "↓"
            row = [sc["title"] if i == 0 else "", f"{m['label']} {arrow}"]
            row += [cell(sc["results"][s], m["key"]) for s in systems]
            if "tritonpy" in systems:
                for o in ("official", "floor"):
                    if o in systems:
                        r = sc["ratios"].get(m["key"], {}).get(f"tritonpy/{o}")
                        row.append(f"{r:.2f}×" if r is not None else "–")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def short_reason(reason: str) -> str:
    """The first line of a failure message (server errors carry tracebacks)."""
    text = reason.replace("\\n", "\n").split("\n", 1)[0]
    return text.replace('{"error":"', "").rstrip('"}').replace("|", "/")[:200]


def notes(doc: dict) -> str:
    out = []
    for sc in doc["scenarios"]:
        for s, res in sc["results"].items():
            if res["status"] not in ("ok", "n/a"):
                out.append(
                    f"- {sc['title']}, {s}: **{res['status']}**: "
                    f"{short_reason(res.get('reason', ''))}"
                )
    sat = [
        f"{sc['title']} ({s}, {res['client_cores_max']:.2f} cores)"
        for sc in doc["scenarios"]
        for s, res in sc["results"].items()
        if res.get("client_saturated")
    ]
    if sat:
        out.append(
            f"- {SATURATION_MARK} the load generator was behind in at least one round "
            "(a client thread or process at ≥0.9 core, or an SSE client whose 1 ms timer "
            "woke ≥5 ms late at p90), so the server may have more to give and its "
            "latencies hold some of the client's delay: " + "; ".join(sat)
        )
    busy = [
        f"{sc['title']} ({s})"
        for sc in doc["scenarios"]
        for s, res in sc["results"].items()
        if res.get("machine_saturated") and not res.get("client_saturated")
    ]
    if busy:
        out.append(
            f"- {MACHINE_MARK} the load generator used at least a quarter of the "
            "machine's cores while client and server together used at least 90% of "
            "them: the client takes CPU the server could use, so the faster system "
            "is understated: " + "; ".join(busy)
        )
    return "\n".join(out)


def markdown(doc: dict) -> str:
    m = doc["machine"]
    cfg = doc["config"]
    return (
        f"Run {doc['date']} on {m.get('cpu', '?')}, {m.get('cores')} cores, "
        f"{m.get('memory_gib', '?')} GiB, Linux {m.get('kernel')}; {m.get('server', '')}. "
        + _wakeups(m)
        + f"{doc['rounds']} alternating round(s) of {', '.join(doc['systems'])}; "
        f"{cfg['duration']} s measured per scenario after {cfg['warmup']} s warm-up; "
        f"whole run {doc['elapsed_s'] / 60:.1f} min. Cells: median (min–max over rounds). "
        "↑ higher is better, ↓ lower is better. CPU = tritonserver plus its stub "
        "processes, from /proc.\n\n" + table(doc) + "\n\n" + notes(doc) + "\n"
    )


def _wakeups(m: dict) -> str:
    """The machine's wake-up round trips, as `python -m bench.wakeup` prints
    them; empty for a run that did not record them."""
    w = m.get("wakeup_round_trip_us") or {}
    if "other_cpu_us" not in w:
        return ""
    return (
        f"A round trip of two processes waking each other takes {w['other_cpu_us']:.0f} us "
        f"across CPUs and {w['same_cpu_us']:.0f} us on one (`python -m bench.wakeup`). "
    )


def plots(doc: dict, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"tritonpy": "tab:blue", "official": "tab:orange", "floor": "tab:gray"}
    by_id = {sc["id"]: sc for sc in doc["scenarios"]}
    conns = [1, *doc["config"]["conns"]]
    written = []

    def series(proto: str, key: str, system: str) -> tuple[list[int], list[float]]:
        xs, ys = [], []
        for c in conns:
            res = by_id.get(f"{proto}_add_sub_c{c}", {}).get("results", {}).get(system, {})
            value = res.get("extra", {}).get(key)
            if value is not None:
                xs.append(c)
                ys.append(value)
        return xs, ys

    for name, keys, ylabel in (
        ("add_sub_throughput.png", [("rps", "-")], "requests/s"),
        (
            "add_sub_latency.png",
            [("p50_us", "-"), ("p99_us", "--")],
            "latency (us), p50 solid, p99 dashed",
        ),
    ):
        fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
        for ax, proto in zip(axes, ("http", "grpc"), strict=False):
            for system in doc["systems"]:
                for key, style in keys:
                    xs, ys = series(proto, key, system)
                    if xs:
                        ax.plot(
                            xs,
                            ys,
                            style,
                            marker="o",
                            ms=3,
                            color=colors[system],
                            label=system if style == "-" else None,
                        )
            ax.set_xscale("log", base=2)
            ax.set_xticks(conns, [str(c) for c in conns])
            ax.set_title(f"add_sub, {proto.upper()}", fontsize=9)
            ax.set_xlabel("connections", fontsize=8)
            ax.grid(alpha=0.3)
            if name == "add_sub_latency.png":
                ax.set_yscale("log")
        axes[0].set_ylabel(ylabel, fontsize=8)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)

    scaling = _scaling_plot(doc, out_dir, plt, colors)
    if scaling is not None:
        written.append(scaling)
    many = _many_plot(doc, out_dir, plt, colors)
    if many is not None:
        written.append(many)
    streams = [sc for sc in doc["scenarios"] if sc["id"].startswith("stream_s")]
    if streams:
        fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
        styles = ["-", "--", ":", "-."]
        for j, sc in enumerate(streams):
            for system in doc["systems"]:
                samples = sc["results"].get(system, {}).get("samples")
                if not samples:
                    continue
                for ax, key in zip(axes, ("ttft_ms", "itl_us"), strict=False):
                    values = samples.get(key) or []
                    if values:
                        ys = [(i + 1) / len(values) for i in range(len(values))]
                        ax.plot(
                            values,
                            ys,
                            styles[j % 4],
                            color=colors[system],
                            label=f"{system}, {sc['title'].split()[1]} streams",
                        )
        axes[0].set_xlabel("time to first token (ms)", fontsize=8)
        axes[1].set_xlabel("inter-token latency (us)", fontsize=8)
        for ax in axes:
            ax.set_xscale("log")
            ax.set_ylabel("fraction", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=6)
        axes[0].set_title("decoupled streaming: TTFT (CDF)", fontsize=9)
        axes[1].set_title("decoupled streaming: inter-token (CDF)", fontsize=9)
        fig.tight_layout()
        path = out_dir / "streaming.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written


# Scenario families plotted against their stream count: id prefix, title.
SCALING = (("stream_async_s", "stream_async"), ("llm_s", "llm"))


def _scaling_plot(doc: dict, out_dir: Path, plt, colors: dict) -> Path | None:
    """tokens/s and TTFT p99 against concurrent streams, one line per system,
    for stream_async and llm."""
    families = [
        (prefix, title, [sc for sc in doc["scenarios"] if sc["id"].startswith(prefix)])
        for prefix, title in SCALING
    ]
    families = [f for f in families if f[2]]
    if not families:
        return None
    fig, axes = plt.subplots(len(families), 2, figsize=(8, 3.0 * len(families)), squeeze=False)
    for row, (prefix, title, scens) in zip(axes, families, strict=True):
        counts = [int(sc["id"][len(prefix) :]) for sc in scens]
        for ax, key, label in zip(
            row, ("tok_s", "ttft_p99_ms"), ("tokens/s", "TTFT p99 (ms)"), strict=True
        ):
            for system in doc["systems"]:
                xs, ys = [], []
                for n, sc in zip(counts, scens, strict=True):
                    m = sc["results"].get(system, {}).get("metrics", {}).get(key)
                    if m is not None:
                        xs.append(n)
                        ys.append(m["median"])
                if xs:
                    ax.plot(xs, ys, "-", marker="o", ms=3, color=colors[system], label=system)
            _count_axis(ax, counts, "concurrent streams", f"{title}: {label}")
            ax.set_yscale("log")
        row[0].legend(fontsize=7)
    return _save(fig, plt, out_dir / "streams_scaling.png")


def _count_axis(ax, counts: list[int], xlabel: str, title: str) -> None:
    """An x axis of counts on a log2 scale, each count a tick."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.grid(alpha=0.3)


def _save(fig, plt, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def _many_plot(doc: dict, out_dir: Path, plt, colors: dict) -> Path | None:
    """Memory (PSS of all stubs plus the server's RSS) and load time against
    the number of stubs: the official backend, tritonpy with stub templates,
    tritonpy starting each stub afresh; many_instances solid, many_models
    dashed, many_groups dotted."""
    lines = []  # (label, color, style, [(n, memory MiB, load s)])
    for kind, style in (("instances", "-"), ("models", "--"), ("groups", ":")):
        for suffix, system, label, color in (
            ("", "official", "official", colors["official"]),
            ("", "tritonpy", "tritonpy", colors["tritonpy"]),
            ("_exec", "tritonpy", "tritonpy stub-fork=false", "tab:cyan"),
        ):
            points = []
            for sc in doc["scenarios"]:
                m = re.fullmatch(rf"many_{kind}{suffix}_n(\d+)", sc["id"])
                res = sc["results"].get(system, {}).get("metrics", {})
                if m and "pss_mib" in res and "load_s" in res:
                    memory = res["pss_mib"]["median"] + res.get("server_rss_mib", {}).get(
                        "median", 0.0
                    )
                    points.append((int(m.group(1)), memory, res["load_s"]["median"]))
            if points:
                lines.append((f"{label}, {kind}", color, style, sorted(points)))
    if not lines:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for label, color, style, points in lines:
        xs = [p[0] for p in points]
        axes[0].plot(
            xs, [p[1] / 1024 for p in points], style, marker="o", ms=3, color=color, label=label
        )
        axes[1].plot(xs, [p[2] for p in points], style, marker="o", ms=3, color=color)
    counts = sorted({p[0] for line in lines for p in line[3]})
    for ax, title in zip(
        axes, ("memory: stubs' PSS + server RSS (GiB)", "load request to ready (s)"), strict=True
    ):
        _count_axis(ax, counts, "stubs (instances or models)", title)
    axes[0].legend(fontsize=6, loc="upper left")
    return _save(fig, plt, out_dir / "many_instances.png")


def headline(doc: dict) -> str:
    by_id = {sc["id"]: sc for sc in doc["scenarios"]}
    parts = []
    for sid, key, what in (
        ("http_add_sub_c1", "p50_us", "HTTP add_sub p50 latency @1"),
        ("http_add_sub_c64", "rps", "HTTP add_sub req/s @64"),
        ("grpc_add_sub_c64", "rps", "gRPC add_sub req/s @64"),
        ("async_sleep_c256", "rps", "async 10 ms req/s @256"),
    ):
        r = by_id.get(sid, {}).get("ratios", {}).get(key, {})
        if "tritonpy/official" in r:
            parts.append(
                f"{what}: tritonpy/official {r['tritonpy/official']:.2f}×"
                + (f", tritonpy/floor {r['tritonpy/floor']:.2f}×" if "tritonpy/floor" in r else "")
            )
    return "; ".join(parts)


# Scenario ids of the runs published apart (servers of their own, minutes
# each): a run of these alone (`--only many_,shared_weights --publish`)
# writes docs/benchmarks/separate.json and the section between these
# marks of docs/benchmarks.md, and leaves the rest of the page alone.
SEPARATE = ("many_", "shared_weights")
SEPARATE_BEGIN, SEPARATE_END = "<!-- separate-runs -->", "<!-- /separate-runs -->"
SEPARATE_PLOT = "many_instances.png"


def is_separate(doc: dict) -> bool:
    return bool(doc["scenarios"]) and all(sc["id"].startswith(SEPARATE) for sc in doc["scenarios"])


def _part(doc: dict, separate: bool) -> dict:
    """``doc`` with only its separate scenarios, or only the others."""
    out = dict(doc)
    out["scenarios"] = [sc for sc in doc["scenarios"] if sc["id"].startswith(SEPARATE) == separate]
    return out


def main_run(doc: dict) -> dict:
    """What the page's "Latest run" table shows of a full run: every
    scenario but the separate ones, which the separate runs' section shows
    (from this run when it is the newer, else from theirs), so that no
    scenario has two figures on the page."""
    return _part(doc, separate=False)


def _median_of(doc: dict, sid: str, key: str, system: str = "tritonpy") -> float | None:
    sc = next((s for s in doc["scenarios"] if s["id"] == sid), None)
    res = {} if sc is None else sc["results"].get(system, {})
    m = res.get("metrics", {}).get(key) if res.get("status") == "ok" else None
    return None if m is None else float(m["median"])


def _medians_of(doc: dict, cells: list[tuple[str, str]]) -> list[float] | None:
    """The tritonpy medians of (scenario id, metric key) ``cells``; None if
    one of them has none."""
    found = [_median_of(doc, sid, key) for sid, key in cells]
    figures = [f for f in found if f is not None]
    return figures if len(figures) == len(found) else None


def _many_summary(doc: dict, what: str) -> list[str]:
    """A sentence per size of ``what`` (many_instances, many_models,
    many_groups):
    tritonpy against the official backend where both ran, else what
    tritonpy did alone."""
    lines = []
    sizes = sorted(
        int(sc["id"].rsplit("_n", 1)[1])
        for sc in doc["scenarios"]
        if re.fullmatch(rf"{what}_n\d+", sc["id"])
    )
    for n in sizes:
        sid = f"{what}_n{n}"
        pss, load = (_median_of(doc, sid, k) for k in ("pss_mib", "load_s"))
        if pss is None or load is None:
            continue
        o_pss, o_load = (_median_of(doc, sid, k, "official") for k in ("pss_mib", "load_s"))
        if o_pss is not None and o_load is not None:
            lines.append(
                f"- {what} {n}: the stubs' summed PSS is {pss / o_pss:.2f}× the "
                f"official's ({pss:,.0f} MiB against {o_pss:,.0f} MiB), start to ready "
                f"{load / o_load:.2f}× ({load:.1f} s against {o_load:.1f} s)."
            )
        else:
            rps = _median_of(doc, sid, "rps")
            lines.append(
                f"- {what} {n}: loaded in {load:.1f} s, the stubs' summed PSS "
                f"{pss:,.0f} MiB"
                + (f"; they served {rps:,.0f} add_sub req/s" if rps is not None else "")
                + "; no figure of the official backend at this size (see below)."
            )
    return lines


def separate_summary(doc: dict) -> str:
    """What the separate runs say, in sentences: tritonpy against the
    official backend at each size of many_instances, many_models and
    many_groups both ran, the sizes tritonpy loaded alone, and
    shared_weights' largest size against one instance. Every figure is the
    result file's."""
    lines = [
        *_many_summary(doc, "many_instances"),
        *_many_summary(doc, "many_models"),
        *_many_summary(doc, "many_groups"),
    ]
    shared = sorted(
        int(sc["id"].rsplit("_n", 1)[1])
        for sc in doc["scenarios"]
        if re.fullmatch(r"shared_weights_n\d+", sc["id"])
    )
    if len(shared) >= 2:
        one, most = shared[0], shared[-1]
        sid = f"shared_weights_n{most}"
        figures = _medians_of(
            doc,
            [
                (f"shared_weights_n{one}", "load_s"),
                *((sid, k) for k in ("load_s", "pss_mib", "pss_after_mib", "answered")),
            ],
        )
        if figures is not None:
            load1, load, pss, after, answered = figures
            lines.append(
                f"- shared_weights {most}: the stubs' summed PSS is {pss:,.0f} MiB loaded and "
                f"{after:,.0f} MiB after {answered:,.0f} requests; start to ready "
                f"{load:.1f} s, {load / load1:.2f}× the {load1:.1f} s of {one} instance."
            )
    return "\n".join(lines)


def _tritonpy_settings(doc: dict) -> str:
    given = doc.get("settings", {}).get("tritonpy", [])
    if not given:
        return "tritonpy runs with its defaults (no backend setting given)"
    return "tritonpy runs with " + ", ".join(f"`{a}`" for a in given)


def separate_section(doc: dict | None) -> str:
    """The section of docs/benchmarks.md drawn from docs/benchmarks/
    separate.json (nothing before there is one)."""
    if doc is None:
        return f"{SEPARATE_BEGIN}{SEPARATE_END}"
    return f"""{SEPARATE_BEGIN}
## Many stubs and shared weights (separate runs)

These scenarios start a tritonserver of their own per system and size, and
load up to 128 stubs each: minutes per run. They are run apart from the
table above, by

```sh
{doc["command"]}
```

which writes this section and its result file,
[benchmarks/separate.json](benchmarks/separate.json)
(`tests/unit/test_bench_separate.py` checks that they agree). The
tritonpy column forks stubs from templates (`stub-fork=true`, the
default); the `stub-fork=false` rows exec a fresh interpreter per stub.
No model sets `stub_preload`; {_tritonpy_settings(doc)}. How to read the
memory figures: [performance.md](performance.md#memory-of-many-stubs).

{separate_summary(doc)}

{markdown(doc)}
![many instances](benchmarks/{SEPARATE_PLOT})
{SEPARATE_END}"""


def _relative(value: Any) -> Any:
    """``value`` with every path in its texts written as a published file
    names it (:func:`bench.paths.portable`: a work file as ``<work>/name``,
    another file of the checkout relative to it): a published file names
    no path of the machine it ran on."""
    if isinstance(value, str):
        return paths.portable(value)
    if isinstance(value, list):
        return [_relative(v) for v in value]
    if isinstance(value, dict):
        return {k: _relative(v) for k, v in value.items()}
    return value


def _publish_separate(doc: dict, images: list[Path]) -> Path:
    """Writes the separate runs' result file and their section of the page."""
    img_dir = DOCS / "benchmarks"
    for p in images:
        if p.name == SEPARATE_PLOT:
            shutil.copy2(p, img_dir / p.name)
    result = published.result_file(doc)
    published.SEPARATE_RESULT.write_text(json.dumps(result, indent=1) + "\n")
    path = DOCS / "benchmarks.md"
    text = path.read_text()
    begin, end = text.index(SEPARATE_BEGIN), text.index(SEPARATE_END) + len(SEPARATE_END)
    path.write_text(text[:begin] + separate_section(result) + text[end:])
    return path


def publish(doc: dict, md: str, images: list[Path]) -> Path:
    # What is published names no path of this machine (bench/paths.py).
    doc, md = _relative(doc), paths.portable(md)
    if is_separate(doc):
        return _publish_separate(doc, images)
    separate = _part(doc, separate=True)
    last = published.load_separate()
    if separate["scenarios"] and (last is None or doc["date"] >= last["date"]):
        _publish_separate(separate, images)
    md = paths.portable(markdown(main_run(doc)))
    images = [p for p in images if p.name != SEPARATE_PLOT]
    img_dir = DOCS / "benchmarks"
    img_dir.mkdir(parents=True, exist_ok=True)
    for p in images:
        shutil.copy2(p, img_dir / p.name)
    pics = "\n".join(f"![{p.stem.replace('_', ' ')}](benchmarks/{p.name})" for p in images)
    page = f"""# Benchmarks

tritonpy side by side with the official Triton Python backend and a native
"floor" backend (`bench/floor/`, C++, no Python: the limit any Python backend
can reach in this server), all in the same tritonserver binary (2.51, from
the `nvidia-pytriton` wheel), the same model repository (the same `model.py`
for both Python backends; only `backend:` differs) and the same load
generators. Each round starts one server per system in turn (tritonpy,
official, floor, then again), warm-up excluded; cells show the median over
rounds and the min–max range. Absolute numbers on a shared 2-core machine are
noisy: read the ratios, measured in the same run.

Headline: {headline(doc) or "see the table"}.

Where a request's time goes, and what is left to gain against the floor:
[performance.md](performance.md).

## What each system runs with

Every server: `tritonserver --model-control-mode=explicit
--exit-on-error=false --strict-readiness=false --log-verbose=0` with one
`--load-model` per model, its own ports, and every model at one
`KIND_CPU` instance. Beyond that, only these differ from the defaults:

{_settings_text(doc)}

## Reproduce

```sh
{doc["command"]}
```

`make bench` sets up what it needs (wrk and libgrpc++-dev from Debian, the
C++ gRPC client built with g++, matplotlib, numpy and torch for the
interpreter the official stub embeds, the floor backend built with CMake), runs for about three quarters of an hour on this machine, and writes
`bench/results/bench.{{md,json}}` and plots, then this page, the result
file it is drawn from ([benchmarks/bench.json](benchmarks/bench.json):
the aggregated results, without each round's raw figures) and every
figure the README and the other pages quote from that file (between
`<!-- bench:NAME -->` marks; `tests/unit/test_bench_figures.py` checks
them all against it). `make bench-smoke` is a seconds-per-scenario
end-to-end check. `python -m bench
--help` (or `tritonpy bench --help`) lists every knob: rounds, durations,
connection counts, sizes, streams, tokens, systems, scenario filter.

{field_section(doc)}

## Latest run

{md}
## Plots

{pics}

{separate_section(published.load_separate())}

{hops.section(hops.load())}

## How each number is measured

- HTTP: wrk (1 thread at 1 connection, else 2), the JSON body
  `{{"inputs":[{{"name":"INPUT0","shape":[4],"datatype":"FP32","data":[1,2,3,4]}},
  {{"name":"INPUT1",...,"data":[1,1,1,1]}}]}}`; percentiles from wrk's histogram.
- gRPC: {_grpc_client_text(doc["config"])}
- identity: a UINT8 tensor in and out as binary tensor data over HTTP,
  {doc["config"]["identity_conns"]} connections; MiB/s counts one direction.
- batched: identity on FP32 [1,4] with `max_batch_size: 64` and
  `dynamic_batching`; avg batch from the model statistics.
- async: `async def execute` awaiting `asyncio.sleep(0.01)`, one instance;
  the floor answers from a timer thread after 10 ms. Measured over at least
  {doc["config"].get("async_duration", 8)} s with no warm-up: a backend that
  serialises the awaits queues 2.6 s of work at 256 connections.
- stream: a decoupled model sending {doc["config"]["tokens"]} INT32 tokens per
  request from a plain `def execute`; each gRPC stream sends its next request
  when the last token arrives. TTFT counts requests sent in the window.
  Inter-token latency is the gap between consecutive tokens of one request
  as the client sees them: a backend that streams one request at a time (the
  official one with a sync `execute`) shows tiny gaps and a long TTFT, one
  that interleaves every stream shows gaps near streams / (tokens/s). Read
  it together with tokens/s and TTFT.
- stream_async and llm run in the first
  {doc["config"].get("streaming_rounds", 2)} rounds only (the time budget).
- stream_async: a decoupled `async def execute` model sending
  {doc["config"].get("async_tokens", 32)} INT32 tokens per request through its response sender,
  `await asyncio.sleep(0)` after each so the other streams take turns; the
  floor serves it as it serves stream. Fewer tokens than stream so that at
  1,000 streams the official backend's requests end within the window
  (TTFT counts requests sent in it).
- llm: [`examples/llm`](../examples/llm/model.py) as it ships (a 3.2 M
  parameter transformer behind `tritonpy.batching.ContinuousBatcher`, 64
  streams per decode step), each gRPC stream asking for
  {doc["config"].get("llm_tokens", 64)} new tokens after the same 32-byte
  prompt with `stream: true`, measured over
  {doc["config"].get("llm_duration", 3)} s after {doc["config"].get("llm_warmup", 1)} s
  of warm-up. Its floor is not a server: `bench/llm_floor.py` drives the
  same network and batcher in one Python process with the same number of
  closed-loop streams on the batcher's own event loop, the most any
  serving layer around this model can reach. "model busy" is the share of
  the window spent inside decode steps (the example's counter
  `llm_step_seconds_total`, read from Triton's metrics; timed directly in
  the floor). CPU per token counts the step's CPU too.
- BLS: a model whose `execute` calls add_sub with `InferenceRequest.exec()`;
  the floor has no BLS model (n/a).
- load: `load_probe` (add_sub, one instance) loaded through the repository
  API and unloaded again; RSS of the stub process it started.
- sandboxed start: `load_probe` and the same model with
  `stub_sandbox=true` in its config, each loaded and unloaded
  {doc["config"].get("start_repeats", 10)} times, alternating, after one
  uncounted cycle each (which starts the stub templates); the median time
  of the load request. Systems without a sandbox report their one time in
  both rows, so the ratio columns compare tritonpy's sandboxed start with
  theirs too.
- many_instances / many_models / many_groups ([bench/many.py](../bench/many.py)): N
  stubs ({", ".join(str(n) for n in doc["config"].get("many_sizes", []))}) of
  an add_sub model that imports {doc["config"].get("many_framework", "torch")}
  and numpy and holds a 16-element tensor: one model with N instances, N
  models of one instance, or N / 4 models of 4 instances, each on a server
  of its own in explicit model control. "load to ready": from the load
  request(s) (one per model, all at once) until every one answered. "PSS of all stubs": the PSS of every
  process under the server, stub template included, summed once loaded
  (PSS counts a page shared by k processes as 1/k in each, so the sum is
  what they take together). "req/s through all": wrk, N connections,
  over every model in turn. The model imports torch at module level and
  sets no `stub_preload` (as a new user writes it). tritonpy runs with stub
  templates (`stub-fork=true`, the default), and, in the rows marked so,
  with `stub-fork=false`.
  They run in the first {doc["config"].get("many_rounds", 1)} round(s); a run
  that would leave the machine under 6 GiB of free memory is skipped, and
  says so under the table.
- shared_weights ([bench/shared_weights.py](../bench/shared_weights.py)):
  one model of N instances ({", ".join(str(n) for n in doc["config"].get("shared_sizes", []))})
  holding {doc["config"].get("shared_mib", 1024)} MiB of random torch
  weights (64 tensors, written with `torch.save` at bench time), which it
  loads in the classmethod `initialize_shared` (tritonpy runs it once per
  model before the instances fork; elsewhere `initialize` calls it when the
  class has no weights yet); each request reads 1 MiB of them, a different
  MiB each time. "PSS of all stubs" is read once loaded, and again after
  {doc["config"].get("shared_requests", 10000):,} requests were answered.
- CPU s / 1k req: user+system CPU of tritonserver and its children during
  the measured window, per 1000 successful requests (tokens for streams).
- "failed": the model did not load, its first request failed or no
  request succeeded in the window; the reason is listed under the table.
"""
    path = DOCS / "benchmarks.md"
    path.write_text(page)
    # The result file every published figure comes from, and the README's
    # table drawn from it.
    published.publish(doc)
    return path


def field_section(doc: dict) -> str:
    """How to check the figures with perf_analyzer and genai-perf, the
    commands the suite runs (bench/field.py), rendered from its settings."""
    from bench import field
    from bench.scenarios import Config

    names = set(Config.__dataclass_fields__)
    cfg = Config(**{k: v for k, v in doc["config"].items() if k in names})
    commands = "\n".join(field.example_commands(cfg))
    rate = f"{cfg.sse_rates[0]:g}" if cfg.sse_rates else "180"
    return f"""## Check with perf_analyzer and genai-perf

The `pa_*` rows are perf_analyzer's own figures, the `genai_*` rows
genai-perf's: the load generators Triton's users measure with, closed loop
(concurrency) and open loop (a request rate, so that latency tails compare
at equal offered load), in the first {cfg.field_rounds} round(s) (the time
budget). `make bench-tools` (which `make bench` runs)
installs them in a venv of their own, `.venv-genai`: perf_analyzer from the
tritonclient 2.51.0 wheel, with libcudart.so.12 from
nvidia-cuda-runtime-cu12 (no GPU is needed) and Debian's libb64-0d, and
genai-perf 0.0.8, the release beside Triton 2.51. Against a server of your
own on the default ports (`make serve` serves add_sub and llm), from the
checkout:

```sh
make bench-tools
export PATH="$PWD/.venv-genai/bin:$PATH"
export LD_LIBRARY_PATH="$(echo $PWD/.venv-genai/lib/python3*/site-packages/nvidia/cuda_runtime/lib)"
.venv/bin/python -m bench.field byte-tokenizer   # genai-perf's --tokenizer, made offline
{commands}
```

genai-perf runs as for vllm_backend (`--backend vllm`): it sends
`text_input`, `stream`, `exclude_input_in_output` and `sampling_parameters`
(JSON with `max_tokens`), which the llm example takes. It counts tokens
with a Hugging Face tokenizer: `bench.field` writes one that maps each
byte to a token (the example's tokens are bytes), so nothing is
downloaded and its counts are the model's. The `genai_engine_*` rows use a
model of bench/models.py in vllm_backend's pattern: `execute` hands each
request to an event loop of the model's own thread, where a stand-in
engine takes 2.0 ms per decode step and the streams send their tokens
before the next step starts (a send that blocks delays the next token, as
in vLLM). What inter-token latency shows above 2.0 ms is the serving
stack's.

genai-perf has no server-sent-events mode for Triton 2.51; for
`generate_stream`, `bench/sse_load.py` has an open-loop mode (`--rate`:
new streams per second at constant intervals; TTFT counts from each
stream's scheduled start), against a model that takes `{{"N": tokens}}`
(bench/models.py's stream_async: a bench run writes its repository to
`repo-tritonpy` in the `work` folder under `bench/`):

```sh
.venv/bin/python bench/sse_load.py --target localhost:8000 --model stream_async \\
    --rate {rate} --conns 1024 --tokens {cfg.async_tokens} --start "$(date +%s)" --end "$(($(date +%s) + 10))"
```

The `sse_stream_async_peak` row runs this open loop at the official
backend's peak rate of the same run: before the first round the suite runs
the official in closed loop at {cfg.sse_peak_streams} SSE streams and takes
its tokens/s over the tokens of a stream as the streams/s to offer every
system (its log says `SSE peak rate of the official: ... streams/s`);
`--sse-peak-rate` gives the rate instead. The SSE rows alone, both
systems, alternating rounds:

```sh
.venv/bin/python -m bench --only sse_ --systems tritonpy,official --rounds 4
```
"""


def render(doc: dict, out_dir: Path, with_plots: bool, publish: bool) -> str:
    """Re-render the table, plots and (optionally) docs from a bench.json."""
    md = markdown(doc)
    (out_dir / "bench.md").write_text(md)
    images = plots(doc, out_dir) if with_plots else []
    if publish:
        globals()["publish"](doc, md, images)
    return md


def write_all(
    out_dir: Path,
    cfg: Config,
    scenarios: list[Scenario],
    systems: list[str],
    results: dict,
    rounds: int,
    elapsed: float,
    with_plots: bool,
    *,
    command: str | None = None,
    publish: bool = False,
    settings: dict[str, list[str]] | None = None,
) -> str:
    doc = build_doc(cfg, scenarios, systems, results, rounds, elapsed, command, settings)
    (out_dir / "bench.json").write_text(json.dumps(doc, indent=1))
    md = markdown(doc)
    (out_dir / "bench.md").write_text(md)
    images: list[Path] = []
    if with_plots:
        try:
            images = plots(doc, out_dir)
        except Exception as e:  # plots are a convenience; the table and JSON count
            print(f"bench: plots failed: {e}")
    if publish:
        globals()["publish"](doc, md, images)
    return md


def _settings_text(doc: dict) -> str:
    # Runs from before the settings were recorded had these.
    args = doc.get("settings") or {"official": list(OFFICIAL_ARGS)}
    lines = []
    for system in doc["systems"]:
        given = ", ".join(f"`{a}`" for a in args.get(system, [])) or "no extra arguments"
        lines.append(f"- {system}: {given}; {SYSTEM_NOTES[system]}")
    return "\n".join(lines)


SYSTEM_NOTES = {
    "tritonpy": (
        "backend settings at their defaults (`tritonpy.conf` names only the\n"
        "  interpreter of the stub); model parameters at their defaults, so a\n"
        "  decoupled model keeps up to 4096 batches in flight\n"
        "  ([configuration.md](configuration.md#streaming-defaults))"
    ),
    "official": (
        "`LD_LIBRARY_PATH` naming the wheel's libraries; numpy<2 and torch (the\n"
        "  examples' pin) installed for the system Python 3.11 its stub embeds,\n"
        "  through a `.pth` file; a copy of `tritonpy.batching` in the llm\n"
        "  model's version directory (`1/tritonpy/batching`), which the\n"
        "  official stub puts on `sys.path`"
    ),
    "floor": "the native backend of `bench/floor/`, which has no settings",
}


def _grpc_client_text(cfg: dict) -> str:
    if cfg.get("grpc_client") == "c++":
        return (
            "`bench/grpc_load.cc`, C++ on Debian's gRPC (generic stub, one\n"
            "  thread, one channel, one completion queue), requests serialized once\n"
            "  and sent as raw bytes. It spends a few microseconds of CPU per call or\n"
            "  streamed response, against the 30-40 of the Python client it replaced\n"
            "  (`bench/grpc_load.py`, still used where the C++ one cannot be built),\n"
            "  which made every system's gRPC figures the client's."
        )
    return (
        "`bench/grpc_load.py`, Python asyncio (grpc.aio, uvloop), requests\n"
        "  serialized once and sent as raw bytes; 1 process at 1 connection, else\n"
        f"  {cfg['grpc_procs']} processes sharing the connections and one\n"
        "  measuring window (the C++ client `bench/grpc_load.cc` could not be\n"
        "  built). A Python client costs more CPU per request than the server:\n"
        f"  where it saturated a core the cell carries {SATURATION_MARK}."
    )
