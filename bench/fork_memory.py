# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What forking from a warm interpreter saves, without a server: import
the given modules once, then fork children that each make a small tensor
and run a full garbage collection (as a stub's first minutes would), and
read every process's /proc/<pid>/smaps_rollup. Once with ``gc.freeze()``
before the forks, once without. Also times one smaps_rollup read of the
warm parent (CPU, the cost the backend's memory metrics pay per stub).

    python -m bench.fork_memory                       # numpy, torch; 4 children
    python -m bench.fork_memory --json docs/benchmarks/fork_memory.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path

MiB = 1 << 20


def rollup(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                out[key] = int(value.split()[0]) << 10
    return out


def figures(pid: int) -> dict[str, float]:
    r = rollup(pid)
    return {
        "rss_mib": r["Rss"] / MiB,
        "pss_mib": r["Pss"] / MiB,
        "private_mib": (r["Private_Clean"] + r["Private_Dirty"]) / MiB,
        "private_dirty_mib": r["Private_Dirty"] / MiB,
    }


def child_work(modules: list[str]) -> None:
    if "torch" in modules:
        import torch

        torch.ones(16)
    elif "numpy" in modules:
        import numpy

        numpy.ones(16)
    gc.collect()


def fork_round(modules: list[str], children: int, freeze: bool) -> dict:
    if freeze:
        gc.freeze()
    pids = []
    for _ in range(children):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child_work(modules)
            os.write(w, b"x")
            signal.pause()  # until the parent has read it
            os._exit(0)
        os.close(w)
        os.read(r, 1)  # the child did its work
        os.close(r)
        pids.append(pid)
    try:
        kids = [figures(p) for p in pids]
        parent = figures(os.getpid())
    finally:
        for p in pids:
            os.kill(p, signal.SIGKILL)
            os.waitpid(p, 0)
        if freeze:
            gc.unfreeze()
    return {
        "gc_freeze": freeze,
        "child": kids[0] if kids else {},
        "children_pss_mib": sum(k["pss_mib"] for k in kids),
        "parent_pss_mib": parent["pss_mib"],
        "total_pss_mib": parent["pss_mib"] + sum(k["pss_mib"] for k in kids),
    }


def read_cost_ms(reads: int = 200) -> float:
    fd = os.open(f"/proc/{os.getpid()}/smaps_rollup", os.O_RDONLY)
    try:
        c0 = time.process_time()
        for _ in range(reads):
            os.lseek(fd, 0, os.SEEK_SET)
            os.read(fd, 1 << 16)
        return (time.process_time() - c0) / reads * 1000
    finally:
        os.close(fd)


def table(result: dict) -> str:
    """What docs/performance.md shows of a result (--json): when and with
    what it was measured, and a table of the warm process, one child with
    and without gc.freeze(), and all of them."""
    warm = result["warm"]
    by_freeze = {r["gc_freeze"]: r for r in result["rounds"]}
    modules = ", ".join(result["modules"])

    def mib(x: float) -> str:
        return f"{x:.0f} MiB" if x >= 10 else f"{x:.1f} MiB"

    versions = ", ".join(f"{m} {v}" for m, v in result["versions"].items())
    rows = [
        f"Measured {result['date']}, CPython {result['python']}, {versions}:",
        "",
        "| | RSS | PSS | private |",
        "|---|---|---|---|",
        f"| the warm process after `import {modules}` | {mib(warm['rss_mib'])} | "
        f"{mib(warm['pss_mib'])} | {mib(warm['private_mib'])} "
        f"({mib(warm['private_dirty_mib'])} dirty) |",
    ]
    for freeze, how in ((True, "after `gc.freeze()`"), (False, "without it")):
        c = by_freeze[freeze]["child"]
        rows.append(
            f"| each child forked {how} | {mib(c['rss_mib'])} | {mib(c['pss_mib'])} | "
            f"{mib(c['private_mib'])} |"
        )
    # Results from before "children" was recorded: the children's PSS over one's.
    first = result["rounds"][0]
    children = result.get("children") or round(
        first["children_pss_mib"] / first["child"]["pss_mib"]
    )
    rows.append(
        f"| parent + {children} children, all PSS together | | "
        f"{mib(by_freeze[True]['total_pss_mib'])} with `gc.freeze()`, "
        f"{mib(by_freeze[False]['total_pss_mib'])} without | |"
    )
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fork_memory", description=__doc__)
    p.add_argument("--modules", default="numpy,torch")
    p.add_argument("--children", type=int, default=4)
    p.add_argument("--json", type=Path, help="also write the result here")
    a = p.parse_args(argv)
    modules = [m for m in a.modules.split(",") if m]
    t0 = time.monotonic()
    for m in modules:
        importlib.import_module(m)
    result = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "modules": modules,
        "children": a.children,
        "versions": {m: getattr(sys.modules[m], "__version__", "?") for m in modules},
        "import_s": time.monotonic() - t0,
        "warm": figures(os.getpid()),
        "smaps_rollup_read_cpu_ms": read_cost_ms(),
        "rounds": [fork_round(modules, a.children, freeze) for freeze in (False, True)],
    }
    text = json.dumps(result, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
