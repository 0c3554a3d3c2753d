# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What waking a sleeping process costs on this machine.

    python -m bench.wakeup [--round-trips N]

Two processes pass one byte back and forth over a Unix socket pair, each
waiting in ``recv`` for the other: first on two different CPUs, then both
on one. The mean round trip is two wake-ups of a sleeping process plus two
small socket calls. Across CPUs each wake-up of an idle CPU is an
inter-processor interrupt; on a virtual machine that can cost tens of
microseconds, and every hop of a request at one client pays it (client,
Triton's threads, the stub, the backend's reader). The benchmark records
both figures with the machine it ran on, so that latencies at one client
from different machines can be read side by side.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

# The echoing side, a fresh interpreter (no fork of a process that may run
# threads): pinned to its CPU, it sends back what it receives until EOF.
_ECHO = """
import os, socket, sys
os.sched_setaffinity(0, {int(sys.argv[2])})
s = socket.socket(fileno=int(sys.argv[1]))
while data := s.recv(16):
    s.send(data)
"""


def round_trip_us(cpu_a: int, cpu_b: int, round_trips: int = 2000) -> float:
    """Mean round trip in microseconds between a process on `cpu_a` and
    one on `cpu_b` (each blocked in recv while the other works)."""
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    child = subprocess.Popen(
        [sys.executable, "-c", _ECHO, str(there.fileno()), str(cpu_b)],
        pass_fds=[there.fileno()],
    )
    there.close()
    saved = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpu_a})
        for _ in range(50):  # both sides placed and warm
            here.send(b"x")
            here.recv(16)
        start = time.perf_counter()
        for _ in range(round_trips):
            here.send(b"x")
            here.recv(16)
        return (time.perf_counter() - start) / round_trips * 1e6
    finally:
        here.close()
        child.wait()
        os.sched_setaffinity(0, saved)


def measure(round_trips: int = 2000) -> dict[str, float]:
    """{"other_cpu_us", "same_cpu_us"} for the first two CPUs this process
    may use; only "same_cpu_us" where it may use one."""
    cpus = sorted(os.sched_getaffinity(0))
    out = {"same_cpu_us": round(round_trip_us(cpus[0], cpus[0], round_trips), 1)}
    if len(cpus) > 1:
        out["other_cpu_us"] = round(round_trip_us(cpus[0], cpus[1], round_trips), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.wakeup", description=__doc__.split("\n")[0])
    p.add_argument("--round-trips", type=int, default=2000)
    a = p.parse_args(argv)
    m = measure(a.round_trips)
    if "other_cpu_us" in m:
        print(f"round trip between two processes on two CPUs: {m['other_cpu_us']:.1f} us")
    print(f"round trip between two processes on one CPU: {m['same_cpu_us']:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
