# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What a large output costs the stub, copied or written in place.

    python -m bench.output_copy [--mib 16] [--requests 60] [--rounds 2]

Runs the real stub (`python -m tritonpy.stub`) with this process playing
the backend's side of the protocol (tests/stub/host.py), as bench.stub_cost
does, and times one-request batches whose model returns one float32 output
of ``--mib`` MiB, filled with a constant, made two ways:

- ``copy``: ``pb_utils.Tensor(name, array)`` of a numpy array the model
  filled (what models written for the official backend do): the stub copies
  it into its shared memory when the response is sent;
- ``in place``: ``pb_utils.Tensor.empty(name, shape, dtype)`` filled in
  place: the stub sends a reference to it.

The time is the host's round trip: the EXECUTE frame out, the RESPONSES
frame back (the host then releases the output, as the backend does once it
has copied it into Triton's buffer). Rounds alternate the two models;
medians over the requests after the first ten.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "stub"))

import protocol_ref as P  # noqa: E402
from host import StubHost  # noqa: E402

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for _ in requests:
            if IN_PLACE:
                t = pb_utils.Tensor.empty("OUT", [COUNT], np.float32)
                t.as_numpy().fill(1.0)
            else:
                a = np.empty(COUNT, np.float32)
                a.fill(1.0)
                t = pb_utils.Tensor("OUT", a)
            out.append(pb_utils.InferenceResponse([t]))
        return out
"""


def median_ms(model_dir: Path, requests: int) -> float:
    host = StubHost()
    try:
        host.handshake(model_dir)
        times = []
        for i in range(requests):
            start = time.perf_counter()
            reply = host.execute(i + 1, [P.request(f"r{i}", [])])
            times.append(time.perf_counter() - start)
            outs = reply["body"]["responses"][0]["outputs"]
            refs = [{"arena_id": t["arena_id"], "offset": t["offset"]} for t in outs]
            host.send(P.encode(P.RELEASE, {"allocations": refs}))
        kept = sorted(times[10:])
        return 1e3 * kept[len(kept) // 2]
    finally:
        host.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--mib", type=int, default=16)
    p.add_argument("--requests", type=int, default=60)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    count = (args.mib << 20) // 4
    with tempfile.TemporaryDirectory(prefix="tritonpy-output-copy-") as tmp:
        dirs = {}
        for label, in_place in (("copy", False), ("in place", True)):
            d = Path(tmp) / label.replace(" ", "_") / "m" / "1"
            d.mkdir(parents=True)
            head = f"IN_PLACE = {in_place}\nCOUNT = {count}\n"
            (d / "model.py").write_text(head + textwrap.dedent(MODEL))
            dirs[label] = d
        results: dict[str, list[float]] = {label: [] for label in dirs}
        for _ in range(args.rounds):
            for label, d in dirs.items():
                results[label].append(median_ms(d, max(args.requests, 11)))
    for label, ms in results.items():
        print(
            f"{label:>8}: {args.mib} MiB output, stub round trip "
            + " / ".join(f"{m:.2f} ms" for m in ms)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
