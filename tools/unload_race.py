# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Reproduces the race in Triton 2.51's core that can crash tritonserver
when a model is unloaded right after its load (docs/reliability.md): with
any backend, the official Python backend included.

Each cycle starts a tritonserver (explicit model control), loads add_sub,
unloads it at once and stops the server; a cycle crashed when the server
exits other than 0 or logs "Signal (11)". With --hold-ms above 0 (the
default) tritonserver runs with tools/unload_race/hold_payload.cc
preloaded, which keeps a backend thread from taking its instance back for
that long after each payload: the window the race needs, held open, so
that every cycle crashes. --hold-ms 0 measures how often it happens by
itself.

    .venv/bin/python tools/unload_race.py --backend official --cycles 5
    .venv/bin/python tools/unload_race.py --backend tritonpy --cycles 100 --hold-ms 0
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import tritonclient.http as httpclient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench/: the official backend's set-up
from bench import environment  # noqa: E402
from tritonpy import install as inst  # noqa: E402
from tritonpy._testbase.server import Tritonserver  # noqa: E402

EXECUTE = "_ZN6triton4core7Payload7ExecuteEPb"  # triton::core::Payload::Execute(bool*)


def execute_range() -> str:
    """Where Payload::Execute lies in the wheel's libtritonserver, as
    "<offset>:<size>" in hex (its symbol table: the symbol is not exported)."""
    server = inst.tritonserver().resolve()
    libs = list(server.parents[3].glob("nvidia_pytriton.libs/libtritonserver*.so*"))
    if not libs:
        sys.exit(f"no libtritonserver beside {server}")
    out = subprocess.run(
        ["nm", "-S", "--defined-only", str(libs[0])], capture_output=True, text=True, check=True
    ).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == EXECUTE:
            return f"{parts[0]}:{parts[1]}"
    sys.exit(f"{EXECUTE} is not in the symbol table of {libs[0]}")


def build_shim(work: Path) -> Path:
    lib = work / "libhold_payload.so"
    source = ROOT / "tools" / "unload_race" / "hold_payload.cc"
    subprocess.run(
        ["g++", "-O1", "-shared", "-fPIC", "-o", str(lib), str(source), "-ldl"], check=True
    )
    return lib


def one_cycle(work: Path, backend: str, env: dict[str, str]) -> bool:
    """Whether tritonserver crashed."""
    repo = work / "repo"
    shutil.copytree(ROOT / "examples" / "model_repository" / "add_sub", repo / "add_sub")
    if backend == "official":
        backends, extra = environment.official_backend_dir(work)
        config = repo / "add_sub" / "config.pbtxt"
        config.write_text(config.read_text().replace('"tritonpy"', '"python"'))
        env = {**env, **extra}
    else:
        backends = inst.backend_dir(work / "backends")
    server = Tritonserver(
        repo,
        backends,
        work,
        args=["--model-control-mode=explicit"],
        prefix=["env", *(f"{k}={v}" for k, v in env.items())],
    )
    server.wait_ready()
    client = httpclient.InferenceServerClient(server.http)
    try:
        client.load_model("add_sub")
        client.unload_model("add_sub")
    except Exception as e:  # noqa: BLE001 - a server that died mid-call is a result
        print(f"  load or unload failed: {e}")
    finally:
        client.close()
    status = server.stop()
    return status != 0 or "Signal (11)" in server.log()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["tritonpy", "official"], default="official")
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--hold-ms", type=int, default=1000)
    parser.add_argument("--work", type=Path, default=None, help="kept; default: a temporary folder")
    a = parser.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="unload-race-"))
    work.mkdir(parents=True, exist_ok=True)
    env: dict[str, str] = {}
    if a.hold_ms > 0:
        env = {
            "LD_PRELOAD": str(build_shim(work)),
            "TRITONPY_HOLD_RANGE": execute_range(),
            "TRITONPY_HOLD_MS": str(a.hold_ms),
        }
    # A crash leaves a core beside its log, for gdb.
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    crashes = 0
    for i in range(a.cycles):
        cycle = work / f"cycle-{i}"
        crashed = one_cycle(cycle, a.backend, env)
        crashes += crashed
        print(
            f"cycle {i}: {'tritonserver crashed, log in ' + str(cycle) if crashed else 'no crash'}"
        )
        if not crashed and a.work is None:
            shutil.rmtree(cycle, ignore_errors=True)
    print(f"{a.backend}, hold {a.hold_ms} ms: {crashes} of {a.cycles} cycles crashed tritonserver")
    return 0


if __name__ == "__main__":
    sys.exit(main())
