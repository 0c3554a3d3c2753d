# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""many_instances and many_models: N stubs of one small model that imports
a framework (torch and numpy in ``make bench``; numpy alone in the smoke
run) and holds a small tensor, on a tritonserver of their own.

``many_instances``: one model with ``instance_group { count: N }``.
The model is what a new user writes: it imports its framework at module
level and sets no ``stub_preload``; whatever tritonpy shares between its
stubs, it finds by itself.
``many_models``: N copies of the model, one instance each, loaded by N
concurrent repository requests (Triton loads them
``--model-load-thread-count``, 4, at a time).
``many_groups``: N stubs as N / GROUP copies of the model, GROUP instances
each (the models of an ensemble, each scaled out), loaded as many_models.

Measured per run, on a fresh server in explicit model control:
- load_s: wall time from the load request(s) to their answer (Triton
  answers a load once every instance is ready);
- pss_mib: the PSS of every process under the server (the stubs, and a stub
  template where there is one), summed from /proc/<pid>/smaps_rollup once
  the load answered: the memory they take together;
- server_rss_mib: tritonserver's own RSS (the backends' share is in it);
- rps: add_sub requests per second through all of them (wrk, N
  connections; many_models spreads them over the N models in turn).

Before a run the free memory is checked: a run that would leave the
machine less than ``RESERVE_GIB`` is skipped, with the reason, rather than
let the kernel's OOM killer end someone else's work (the machine is
shared). The estimate is what the same system took per instance at the
last smaller size, or ``GUESS_MIB`` before that. The official backend
never runs more than ``OFFICIAL_MOST`` stubs."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from bench import loads
from bench.models import ADD_SUB_INPUTS, ADD_SUB_PY, BACKENDS
from tritonpy._testbase.server import Server, descendants, pss_bytes, rss_bytes

MiB = 1 << 20
RESERVE_GIB = 6.0
# The most stubs the official backend is given: 64 of a torch model take
# about 10 GiB, and at 64 it already aborted a load once (boost
# interprocess lock_exception) on the shared bench machine.
OFFICIAL_MOST = 64
# What one stub that imported torch costs at most, before a measurement
# says better (the official backend's is ~150 MiB).
GUESS_MIB = {"torch": 200.0, "numpy": 60.0}
# Backend settings of tritonpy's two ways of starting stubs (the key exists
# once stub templates do; a tritonpy without it logs it as unknown).
VARIANT_ARGS = {
    "fork": ["--backend-config=tritonpy,stub-fork=true"],
    "exec": ["--backend-config=tritonpy,stub-fork=false"],
}
UNKNOWN_FORK = "unknown backend setting 'stub-fork'"
NO_FORK = "this tritonpy has no stub-fork key: no stub template to measure"

# add_sub, with the framework imported and a small tensor held.
MODEL_PY = ADD_SUB_PY.replace(
    "import numpy as np\n", "import numpy as np\n{framework_import}\n"
).replace(
    "class TritonPythonModel:\n",
    "class TritonPythonModel:\n"
    "    def initialize(self, args):\n"
    "        # A small tensor, as a pre- or post-processing model holds.\n"
    "        self.held = {framework_tensor}\n\n",
)
FRAMEWORKS = {
    "torch": ("import torch", "torch.ones(16)"),
    "numpy": ("", "np.ones(16, dtype=np.float32)"),
}
CONFIG = """name: "{name}"
backend: "{backend}"
max_batch_size: 0
input [
  {{ name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] }},
  {{ name: "INPUT1", data_type: TYPE_FP32, dims: [ 4 ] }}
]
output [
  {{ name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] }},
  {{ name: "OUTPUT1", data_type: TYPE_FP32, dims: [ 4 ] }}
]
instance_group [ {{ kind: KIND_CPU, count: {count} }} ]
"""


# many_groups' instances per model.
GROUP = 4

# Bytes per instance each (system, variant, kind) took at its last size.
_per_instance: dict[tuple[str, str, str], float] = {}


def model_names(kind: str, n: int) -> list[str]:
    if kind == "instances":
        return ["many"]
    return [f"many_{i}" for i in range(max(1, n // GROUP) if kind == "groups" else n)]


def instance_count(kind: str, n: int) -> int:
    """Instances of each model of a run of ``n`` stubs (a smoke run's
    many_groups: one model of its ``n``)."""
    return {"instances": n, "groups": min(GROUP, n)}.get(kind, 1)


def write_repository(dest: Path, system: str, kind: str, n: int, framework: str) -> list[str]:
    """The repository of one run; returns the names to load."""
    imp, tensor = FRAMEWORKS[framework]
    header = "# SPDX-License-Identifier: BSD-3-Clause\n# Copyright (c) The tritonpy authors.\n"
    names = model_names(kind, n)
    for name in names:
        (dest / name / "1").mkdir(parents=True, exist_ok=True)
        (dest / name / "1" / "model.py").write_text(
            header + MODEL_PY.format(framework_import=imp, framework_tensor=tensor)
        )
        count = instance_count(kind, n)
        (dest / name / "config.pbtxt").write_text(
            CONFIG.format(name=name, backend=BACKENDS[system], count=count)
        )
    return names


def knows_setting(backends: Path, key: str) -> bool:
    """Whether tritonpy's backend library in ``backends`` names the setting
    ``key`` (the backend reads its settings only once a model loads)."""
    libraries = list(backends.glob("*/libtriton_tritonpy.so"))
    return any(key.encode() in lib.read_bytes() for lib in libraries) or not libraries


def available_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) << 10
    return 0


def kill_strays(where: Path) -> None:
    """SIGKILLs what is left of this run's stubs: a server that crashed
    leaves its stubs to init, no longer under it (seen with the official
    backend loading 64 instances at once). They are found by this run's
    own repository path on their command lines."""
    mark = str(where).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if mark in f.read():
                    os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass


def wait_gone(pids: set[int], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.1)


def load(server: Server, names: list[str], where: Path) -> tuple[float, str]:
    """Loads ``names`` at once; seconds until every load answered, and the
    first failure ("" when none). When the server dies meanwhile, its stubs
    (found by ``where``, see kill_strays) are killed: they may hold its
    connections open, and the load would wait for nothing."""

    def one(name: str) -> tuple[int, bytes]:
        try:
            return server.request("POST", f"/v2/repository/models/{name}/load", b"", timeout=900)
        except OSError as e:
            return 0, f"{type(e).__name__}: {e}".encode()

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(names), 128)) as pool:
        futures = [pool.submit(one, name) for name in names]
        pending = set(futures)
        while pending:
            _, pending = concurrent.futures.wait(pending, timeout=1)
            if pending and server.proc.poll() is not None:
                kill_strays(where)
        answers = [f.result() for f in futures]
    elapsed = time.monotonic() - t0
    failed = next((body for code, body in answers if code != 200), None)
    if failed is not None and server.proc.poll() is not None:
        failed = b"the server died (its log: server.log) after " + failed
    return elapsed, "" if failed is None else failed.decode(errors="replace")[:300]


@dataclass(frozen=True)
class Setup:
    """What a scenario with servers of its own runs them with: the
    system's backends, environment and arguments, ``variant`` ("fork" or
    "exec" for tritonpy's stub-fork setting, "" for other systems), where
    to work, and wrk with its window."""

    system: str
    variant: str
    work: Path
    backends: Path
    env: dict[str, str]
    args: list[str]
    wrk: str
    scripts: Path
    duration: float
    warmup: float

    def server(self, repo: Path, log: Path) -> Server:
        return Server(
            repo,
            self.backends,
            log,
            models=[],
            env=self.env,
            extra_args=[*self.args, *VARIANT_ARGS.get(self.variant, [])],
        )


def run(setup: Setup, *, kind: str, n: int, framework: str) -> dict:
    """One run; the scenario's raw figures, or ``skipped`` with the reason.
    A server that died while loading (the official backend's did, at 64
    instances) gets one more try, memory permitting."""
    r = _run_once(setup, kind=kind, n=n, framework=framework, attempt=1)
    if "the server died" in r.get("error", ""):
        again = _run_once(setup, kind=kind, n=n, framework=framework, attempt=2)
        r = again if "skipped" not in again else r
        r["attempts"] = 2
    return r


def _run_once(setup: Setup, *, kind: str, n: int, framework: str, attempt: int) -> dict:
    system, variant, backends = setup.system, setup.variant, setup.backends
    if system == "official" and n > OFFICIAL_MOST:
        return {"skipped": f"the official backend runs at most {OFFICIAL_MOST} stubs here"}
    key = (system, variant, kind)
    guess = _per_instance.get(key, GUESS_MIB[framework] * MiB)
    need, have = n * guess, available_bytes()
    if have - need < RESERVE_GIB * (1 << 30):
        return {
            "skipped": f"{n} instances need about {need / (1 << 30):.1f} GiB "
            f"({guess / MiB:.0f} MiB each), {have / (1 << 30):.1f} GiB are available "
            f"and {RESERVE_GIB:.0f} GiB must stay free"
        }
    if variant == "fork" and not knows_setting(backends, "stub-fork"):
        return {"skipped": NO_FORK}  # no need to load N stubs to learn it
    where = setup.work / f"many-{system}-{variant}-{kind}-{n}-{attempt}"
    names = write_repository(where / "repo", system, kind, n, framework)
    server = setup.server(where / "repo", where / "server.log")
    seen: set[int] = set()
    try:
        server.wait_ready()
        base_rss = rss_bytes(server.proc.pid)
        load_s, failed = load(server, names, where)
        if failed:
            return {"ok": 0, "error": f"load: {failed}"}
        # Triton reads the backend's settings when a model first needs it.
        if variant == "fork" and UNKNOWN_FORK in server.log():
            return {"skipped": NO_FORK}
        procs = descendants(server.proc.pid)
        seen.update(procs)
        pss = sum(pss_bytes(p) for p in procs)
        server_rss = rss_bytes(server.proc.pid)
        _per_instance[key] = (pss + max(0, server_rss - base_rss)) / n
        paths = [f"/v2/models/{name}/infer" for name in names]
        body = loads.json_body(names[0], ADD_SUB_INPUTS)
        script = loads.wrk_script(body, setup.scripts / f"many_{kind}_{n}.lua", paths=paths)
        r = loads.run_wrk(
            setup.wrk,
            server,
            script,
            paths[0],
            conns=max(4, n),
            duration=setup.duration,
            warmup=setup.warmup,
        )
        r.update(
            load_s=load_s,
            pss_mib=pss / MiB,
            server_rss_mib=server_rss / MiB,
            processes=len(procs),
        )
        return r
    finally:
        seen.update(descendants(server.proc.pid))
        server.stop(timeout=300)
        wait_gone(seen)  # the next run counts on this memory
        kill_strays(where)
