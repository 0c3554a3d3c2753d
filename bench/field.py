# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The field's own load generators: perf_analyzer (from the tritonclient
2.51.0 wheel) and genai-perf 0.0.8, which Triton's users measure with, so
that they can check our figures with tools they trust.

Both live in a venv of their own, FIELD_VENV, which `make bench-tools`
makes (the Makefile); perf_analyzer there loads libcudart.so.12 from the
nvidia-cuda-runtime-cu12 package of the same venv (no GPU is needed) and
Debian's libb64. Scenarios that need them are skipped, with the reason,
while the venv is missing.

genai-perf counts tokens with a Hugging Face tokenizer, which it would
download; nothing is downloaded here: ``byte_tokenizer`` writes one that
maps each byte to a token (the llm example's and the engine model's
tokens are bytes), so its counts are the models' own.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.environment import ROOT
from tritonpy._testbase.server import Server

FIELD_VENV = ROOT / ".venv-genai"
# A stream's prompt and length: as the llm scenarios (32 bytes, 64 tokens).
PROMPT_TOKENS = 32
OUTPUT_TOKENS = 64

# Run by the field venv's Python: a byte-level BPE without merges, saved as
# a transformers tokenizer directory (argv[1]).
_TOKENIZER_PY = """
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

alphabet = pre_tokenizers.ByteLevel.alphabet()
vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
tok.decoder = decoders.ByteLevel()
PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(sys.argv[1])
"""


class Missing(RuntimeError):
    """The field venv lacks a tool: the scenario is skipped."""


def _bin(name: str) -> Path:
    path = FIELD_VENV / "bin" / name
    if not path.is_file():
        raise Missing(f"{path.relative_to(ROOT)} is missing: run `make bench-tools`")
    return path


def tool_env() -> dict[str, str]:
    """The environment perf_analyzer (also as genai-perf's child) runs in:
    the venv's bin first on PATH, its CUDA runtime on LD_LIBRARY_PATH."""
    found = sorted(FIELD_VENV.glob("lib/python3*/site-packages/nvidia/cuda_runtime/lib"))
    if not found:
        raise Missing("nvidia-cuda-runtime-cu12 is missing from the field venv")
    env = dict(os.environ)
    env["PATH"] = f"{FIELD_VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    libs = [str(found[-1]), env.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(x for x in libs if x)
    return env


def byte_tokenizer(work: Path, name: str = "byte-tokenizer") -> Path:
    """A tokenizer directory for genai-perf's --tokenizer (made once)."""
    dest = work / name
    if not (dest / "tokenizer.json").is_file():
        subprocess.run(
            [str(_bin("python")), "-c", _TOKENIZER_PY, str(dest)],
            check=True,
            capture_output=True,
        )
    return dest


@dataclass(frozen=True)
class Load:
    """What one run offers ``model``: closed loop at ``concurrency``, or
    open loop at ``rate`` requests/s, measured in windows of ``window_ms``."""

    model: str
    concurrency: int | None = None
    rate: float | None = None
    window_ms: int = 3000

    def args(self, closed: str, open_: str) -> list[str]:
        """The tool's flag for this load, given its closed and open ones."""
        if self.rate:
            return [open_, f"{self.rate:g}"]
        return [closed, str(self.concurrency or 1)]

    @property
    def label(self) -> str:
        return f"{self.model}-r{self.rate:g}" if self.rate else f"{self.model}-c{self.concurrency}"


def perf_analyzer_command(binary: str, grpc: str, load: Load, csv_out: str) -> list[str]:
    """Three windows taken as they come: perf_analyzer stops when the last
    three are "stable", here when their req/s and mean latency are within
    100x of each other (a busy machine's windows differ more than its
    default 10% allows, and the search would run on). The percentiles are
    in ``csv_out``."""
    return [
        binary,
        "-m",
        load.model,
        "-i",
        "grpc",
        "-u",
        grpc,
        *load.args("--concurrency-range", "--request-rate-range"),
        "--measurement-interval",
        str(load.window_ms),
        "--max-trials",
        "3",
        "--stability-percentage",
        "10000",
        "-f",
        csv_out,
    ]


def genai_perf_command(
    binary: str, grpc: str, load: Load, tokens: int, tokenizer: str, artifacts: str
) -> list[str]:
    """As for vllm_backend over gRPC streaming: prompts of PROMPT_TOKENS,
    exactly ``tokens`` out (genai-perf sends max_tokens and min_tokens)."""
    return [
        binary,
        "profile",
        "-m",
        load.model,
        "--service-kind",
        "triton",
        "--backend",
        "vllm",
        "--streaming",
        "-u",
        grpc,
        "--tokenizer",
        tokenizer,
        "--synthetic-input-tokens-mean",
        str(PROMPT_TOKENS),
        "--synthetic-input-tokens-stddev",
        "0",
        "--output-tokens-mean",
        str(tokens),
        "--output-tokens-stddev",
        "0",
        "--output-tokens-mean-deterministic",
        "--random-seed",
        "1",
        "--measurement-interval",
        str(load.window_ms),
        "--artifact-dir",
        artifacts,
        *load.args("--concurrency", "--request-rate"),
    ]


def run_perf_analyzer(server: Server, work: Path, load: Load) -> dict:
    """perf_analyzer on ``load`` over gRPC: req/s and latency percentiles
    (us), as perf_analyzer reports them."""
    out = work / f"perf_analyzer-{load.label}.csv"
    out.unlink(missing_ok=True)
    cmd = perf_analyzer_command(str(_bin("perf_analyzer")), server.grpc, load, str(out))
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=tool_env(), capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - t0
    if proc.returncode != 0 or not out.is_file():
        return {"ok": 0, "error": f"perf_analyzer: {(proc.stderr or proc.stdout)[-300:]}"}
    row = next(csv.DictReader(out.open()))
    rps = float(row["Inferences/Second"])
    return {
        "ok": int(rps * wall),
        "rps": rps,
        "p50_us": float(row["p50 latency"]),
        "p90_us": float(row["p90 latency"]),
        "p99_us": float(row["p99 latency"]),
    }


def run_genai_perf(server: Server, work: Path, load: Load, tokens: int = OUTPUT_TOKENS) -> dict:
    """genai-perf on ``load`` over gRPC streaming, as for vllm_backend
    (``--backend vllm``): tokens/s, TTFT (ms) and inter-token latency (us)."""
    artifacts = work / "genai-perf" / load.label
    shutil.rmtree(artifacts, ignore_errors=True)
    tokenizer = str(byte_tokenizer(work))
    cmd = genai_perf_command(
        str(_bin("genai-perf")), server.grpc, load, tokens, tokenizer, str(artifacts)
    )
    proc = subprocess.run(
        cmd, env=tool_env(), capture_output=True, text=True, timeout=600, cwd=work
    )
    found = sorted(artifacts.rglob("*genai_perf.json"))
    if proc.returncode != 0 or not found:
        return {"ok": 0, "error": f"genai-perf: {(proc.stderr or proc.stdout)[-300:]}"}
    doc = json.loads(found[-1].read_text())
    ttft, itl = doc["time_to_first_token"], doc["inter_token_latency"]
    if ttft.get("unit") != "ms" or itl.get("unit") != "ms":
        return {"ok": 0, "error": f"genai-perf: unexpected units {ttft.get('unit')}"}
    count = int(doc["request_throughput"]["avg"] * load.window_ms / 1000) or 1
    tok_s = doc["output_token_throughput"]["avg"]
    return {
        "ok": count,
        "tokens": int(tok_s * load.window_ms / 1000) or 1,
        "tok_s": tok_s,
        "ttft_p50_ms": ttft["p50"],
        "ttft_p99_ms": ttft["p99"],
        "itl_p50_us": itl["p50"] * 1000,
        "itl_p99_us": itl["p99"] * 1000,
    }


def example_commands(cfg: Any) -> list[str]:
    """The commands the suite runs (bench.scenarios.Config ``cfg``), as a
    user types them against a server on the default ports."""
    grpc, w = "localhost:8001", cfg.field_window_ms
    pa = [Load("add_sub", concurrency=c, window_ms=w) for c in cfg.pa_conns[-1:]]
    pa += [Load("add_sub", rate=r, window_ms=w) for r in cfg.pa_rates[:1]]
    llm = [Load("llm", concurrency=c, window_ms=w) for c in cfg.genai_llm_streams[:1]]
    llm += [Load("llm", rate=r, window_ms=w) for r in cfg.genai_llm_rates[:1]]
    out = [shlex.join(perf_analyzer_command("perf_analyzer", grpc, x, "pa.csv")) for x in pa]
    out += [
        shlex.join(
            genai_perf_command("genai-perf", grpc, x, cfg.llm_tokens, "byte-tokenizer", "artifacts")
        )
        for x in llm
    ]
    return out


def available() -> str | None:
    """Why the field's tools cannot run, or None."""
    try:
        _bin("perf_analyzer")
        _bin("genai-perf")
        tool_env()
    except Missing as e:
        return str(e)
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.field",
        description="Write the byte-level tokenizer genai-perf's --tokenizer takes "
        "(for the llm example and the bench's engine model), with the venv of "
        "`make bench-tools`.",
    )
    p.add_argument("dest", type=Path, help="directory to write (its parent must exist)")
    a = p.parse_args(argv)
    try:
        print(byte_tokenizer(a.dest.resolve().parent, a.dest.name))
    except (Missing, subprocess.CalledProcessError) as e:
        print(f"bench.field: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
