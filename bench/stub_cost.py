# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Instructions a stub spends per request, counted by callgrind.

    python -m bench.stub_cost [--requests 1000] [--top 25] [--model add_sub]

Runs the real stub (`python -m tritonpy.stub`) under valgrind's callgrind,
plays the backend's side of the protocol (tests/stub/host.py), loads the
benchmark's add_sub model, warms up, then zeroes the counters and sends
`--requests` one-request batches one after the other, as the backend does
for add_sub at one connection. Instruction counts do not depend on what
else the machine is doing, so this is the number to watch when changing
the stub's hot path. Prints instructions per request and the functions
(inclusive of what they call) that carry them.

``--model`` splits the cost: ``empty`` answers every request with one
prebuilt response without outputs (what the stub itself costs: receive,
decode, requests, dispatch, encode, send); ``outputs`` returns two new
4-element output tensors without reading the inputs (plus what outputs
cost); ``add_sub`` is the benchmark's model (plus reading the inputs and
the arithmetic). ``stream`` is the benchmark's decoupled model: each
request asks for 100 tokens, sent one response each through the response
sender; counts are then per token. ``bls`` is the benchmark's BLS model
(a blocking ``exec()`` of add_sub per request): this host answers each
BLS_REQUEST with add_sub's two outputs, so the count is the calling stub's
whole share of a BLS request (the called model's stub is add_sub's),
with ``bls_spin_microseconds: 0``: under callgrind the stub runs tens of
times slower, so how many polls a spin makes before the answer is there
depends on the moment, and the count would too.
``metric`` is ``empty`` plus one counter increment per request (custom
metrics: the increment waits for the backend, which this host plays by
answering METRIC_DONE), so ``metric`` minus ``empty`` is what one metric
update costs the stub.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "stub"))

from bench.models import ADD_SUB_PY, BLS_PY, STREAM_PY  # noqa: E402

import protocol_ref as P  # noqa: E402
from host import StubHost  # noqa: E402

FP32 = 11
INT32 = 8
TOKENS = 100  # per request of the stream model

MODELS = {
    "add_sub": ADD_SUB_PY,
    "empty": """
import triton_python_backend_utils as pb_utils

_ANSWER = pb_utils.InferenceResponse(output_tensors=[])


class TritonPythonModel:
    def execute(self, requests):
        return [_ANSWER for _ in requests]
""",
    "stream": STREAM_PY,
    "metric": """
import triton_python_backend_utils as pb_utils

_ANSWER = pb_utils.InferenceResponse(output_tensors=[])


class TritonPythonModel:
    def execute(self, requests):
        if not hasattr(self, "requests"):  # made at the first batch: the handshake answers no METRIC
            self.family = pb_utils.MetricFamily(
                "requests_total", "requests seen", pb_utils.MetricFamily.COUNTER
            )
            self.requests = self.family.Metric({"model": "metric"})
        for _ in requests:
            self.requests.increment(1)
        return [_ANSWER for _ in requests]
""",
    "bls": BLS_PY,
    "outputs": """
import numpy as np
import triton_python_backend_utils as pb_utils

_ZEROS = np.zeros(4, np.float32)


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", _ZEROS), pb_utils.Tensor("OUTPUT1", _ZEROS)])
            for _ in requests
        ]
""",
}


def fp32(name: str, values: list[float]) -> dict:
    return P.inline(name, FP32, [len(values)], struct.pack(f"<{len(values)}f", *values))


def run(requests: int, warmup: int, work: Path, source: str = ADD_SUB_PY) -> Path:
    """Returns the callgrind output file of the measured window."""
    stream = source is STREAM_PY
    bls = source is BLS_PY
    name = "bls" if bls else "add_sub"  # a BLS model may not call itself
    model = work / name / "1"
    model.mkdir(parents=True)
    (model / "model.py").write_text(source)
    out = work / "callgrind.out"
    host = StubHost(
        prefix=[
            "valgrind",
            "--tool=callgrind",
            "--quiet",
            f"--callgrind-out-file={out}",
            "--instr-atstart=no",  # start-up and warm-up run uninstrumented
        ]
    )
    try:
        settings = {"decoupled": True} if stream else None
        config: dict[str, Any] = {"name": name}
        if bls:  # a count that repeats (see the module's text)
            config["parameters"] = {"bls_spin_microseconds": {"string_value": "0"}}
        assert host.handshake(model, config=config, settings=settings, timeout=300)["ok"]
        if stream:
            tokens = P.inline("N", INT32, [1], struct.pack("<i", TOKENS))
            batch = [P.request("r", [tokens])]
        else:
            batch = [P.request("r", [fp32("INPUT0", [1, 2, 3, 4]), fp32("INPUT1", [1, 1, 1, 1])])]
        metric = source is MODELS["metric"]
        step = (
            stream_once
            if stream
            else bls_once
            if bls
            else metric_once
            if metric
            else StubHost.execute
        )
        for i in range(warmup):
            step(host, i + 1, batch)
        control(host.proc.pid, "-i", "on")
        for i in range(requests):
            step(host, warmup + i + 1, batch)
        control(host.proc.pid, "-i", "off")
    finally:
        host.close()  # the stub leaves; callgrind writes its counts
    return next(work.glob(out.name + "*"))  # callgrind may append the pid


def stream_once(host: StubHost, batch_id: int, batch: list[dict]) -> None:
    """One decoupled batch: its TOKENS responses (the last one final) and
    EXECUTE_DONE, in whatever frames the stub sends them."""
    host.send(P.encode(P.EXECUTE, {"requests": batch}, id=batch_id))
    got = host.entries(
        lambda got: (
            any("execute_done" in e for e in got)
            and any(e.get("response_flags", 0) & P.RESP_FINAL for e in got)
        )
    )
    assert sum(1 for e in got if "response_flags" in e) == TOKENS, got


def bls_once(host: StubHost, batch_id: int, batch: list[dict]) -> None:
    """One request of the BLS model: its BLS_REQUEST answered as add_sub
    would answer it, then the model's own response."""
    host.send(P.encode(P.EXECUTE, {"requests": batch}, id=batch_id))
    call = host.recv_type("BLS_REQUEST")
    outputs = [fp32("OUTPUT0", [2, 3, 4, 5]), fp32("OUTPUT1", [0, 1, 2, 3])]
    body = {
        "response_flags": 1,
        "has_error": 0,
        "error_code": 0,
        "error_message": "",
        "parameters": "",
        "outputs": outputs,
    }
    host.send(P.encode(P.BLS_RESPONSE, body, id=call["id"]))
    reply = host.recv_type("RESPONSES")
    assert len(reply["body"]["responses"][0]["outputs"]) == 2, reply


def metric_once(host: StubHost, batch_id: int, batch: list[dict]) -> None:
    """One batch of the metric model: each METRIC call answered as the
    backend answers it, then the model's response."""
    host.send(P.encode(P.EXECUTE, {"requests": batch}, id=batch_id))
    while True:
        f = host.recv()
        if f["type"] == "METRIC":
            if f["id"]:
                reply = {"ok": 1, "error": "", "value": 0.0}
                host.send(P.encode(P.METRIC_DONE, reply, id=f["id"]))
            continue
        if f["type"] == "RESPONSES":
            return
        assert f["type"] == "ARENA", f


def control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def total_instructions(dump: Path) -> int:
    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise ValueError(f"no totals in {dump}")


def record(path: Path, model: str, count: float) -> None:
    """Puts ``count`` (rounded to hundreds, as the docs quote it) for
    ``model`` into the JSON file ``path``, keeping the other models'."""
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc["what"] = (
        "instructions the stub spends per request (per token for stream), "
        "python -m bench.stub_cost --requests N --model M"
    )
    doc.setdefault("instructions_per_request", {})[model] = int(count)
    doc["python"] = platform.python_version()
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--top", type=int, default=25, help="functions to list")
    p.add_argument("--model", choices=sorted(MODELS), default="add_sub")
    p.add_argument(
        "--save", type=Path, help="keep callgrind's output file here (for callgrind_annotate)"
    )
    p.add_argument(
        "--json",
        type=Path,
        help="record the count in this JSON file, beside the other models' "
        "(docs/benchmarks/stub_cost.json holds the figures docs/performance.md quotes)",
    )
    args = p.parse_args(argv)
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        sys.exit("needs valgrind (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="tritonpy-stub-cost-") as tmp:
        dump = run(args.requests, args.warmup, Path(tmp), MODELS[args.model])
        total = total_instructions(dump)
        if args.save:
            shutil.copyfile(dump, args.save)
        if args.model == "stream":
            args.requests *= TOKENS  # counts below are per token
            print(f"stub: {total / args.requests:,.0f} instructions per stream token")
        else:
            print(f"stub: {total / args.requests:,.0f} instructions per {args.model} request")
        if args.json:
            record(args.json, args.model, round(total / args.requests, -2))
        report = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(dump)],
            capture_output=True,
            text=True,
            env={**os.environ, "LC_ALL": "C"},
        ).stdout
        lines = [line for line in report.splitlines() if line.strip()[:1].isdigit()]
        for line in lines[: args.top]:
            count, _, where = line.strip().partition(" ")
            n = int(count.replace(",", ""))
            print(f"{n / args.requests:>10,.0f}  {100 * n / total:5.1f}%  {where.strip()[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
