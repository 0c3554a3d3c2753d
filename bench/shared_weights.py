# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""shared_weights: one model of N instances (1, 4, 16) holding 1 GiB of
torch weights, on a tritonserver of its own.

The weights are 64 random float32 tensors (of 16 MiB each for 1 GiB;
``--shared-mib`` sets the total, which the smoke run makes small), written
once per bench work directory with ``torch.save`` (no download); the model reads
them with ``torch.load`` into memory of its own (not a file mapping, which
the page cache would share by itself) in the classmethod
``initialize_shared``. tritonpy runs that once per model in the model's
stub template, before the instances fork; a backend that never calls it
(the official one, ``stub-fork=false``) leaves the class without weights,
and each instance's ``initialize`` then calls it for itself: the model
runs unchanged on both. Each request reads 1 MiB of the weights, a
different MiB each time (every page of them within 1,024 requests of an
instance), as inference reads a model's weights.

Measured per run, on a fresh server in explicit model control:
- load_s: from the load request to its answer (every instance ready);
- pss_mib: the PSS of every process under the server, summed once loaded;
- rps, errors: add_sub requests through all N (wrk, N connections);
- pss_after_mib: the same sum once at least ``REQUESTS`` requests were
  answered (wrk is run again until then): pages written under inference
  (refcounts, the collector) would show here as private copies.

A run that would leave the machine less than ``many.RESERVE_GIB`` free is
skipped, with the reason. The need is extrapolated from the sizes measured
before (the memory of N instances against N), else a whole copy of the
weights per instance is assumed."""

from __future__ import annotations

import time
from pathlib import Path

from bench import loads, many
from bench.models import ADD_SUB_INPUTS, BACKENDS
from tritonpy._testbase.server import descendants, pss_bytes, rss_bytes

MiB = 1 << 20
LAYERS = 64
REQUESTS = 10_000
# What one instance that loads 1 GiB of weights for itself takes, at most.
GUESS_MIB = 1400.0

MODEL_PY = '''# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""add_sub, holding 1 GiB of torch weights that every instance reads."""

import numpy as np
import torch
import triton_python_backend_utils as pb_utils

WEIGHTS = {weights!r}
CHUNK = 1 << 18  # float32 elements: 1 MiB of a layer per request


class TritonPythonModel:
    layers = None  # set by initialize_shared

    @classmethod
    def initialize_shared(cls, args):
        # tritonpy calls this once per model, before its instances fork:
        # every instance inherits the weights, shared copy-on-write.
        cls.layers = [t.view(-1) for t in torch.load(WEIGHTS, weights_only=True).values()]

    def initialize(self, args):
        if type(self).layers is None:  # a backend that never calls it
            type(self).initialize_shared(args)
        # One thread per instance: the instances are the parallelism.
        torch.set_num_threads(1)
        self.served = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            layer = self.layers[self.served % len(self.layers)]
            start = (self.served // len(self.layers)) * CHUNK % layer.numel()
            self.checksum = float(layer[start : start + CHUNK].sum())
            self.served += 1
            in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT0", (in0 + in1).astype(np.float32)),
                        pb_utils.Tensor("OUTPUT1", (in0 - in1).astype(np.float32)),
                    ]
                )
            )
        return responses
'''

# (system, variant, weights MiB) -> [(instances, bytes they took)], in the
# order measured (the sizes grow).
_measured: dict[tuple[str, str, int], list[tuple[int, float]]] = {}


def weights_file(work: Path, mib: int) -> Path:
    """``mib`` MiB of weights, written once per work directory."""
    path = work / f"shared_weights_{mib}.pt"
    if not path.exists():
        import torch

        g = torch.Generator().manual_seed(0)
        shape = (mib * 4, 1024)  # float32: mib / 64 MiB per layer
        layers = {f"layer{i}": torch.randn(shape, generator=g) for i in range(LAYERS)}
        partial = path.with_suffix(".partial")
        torch.save(layers, partial)
        partial.rename(path)
    return path


def write_repository(dest: Path, system: str, n: int, weights: Path) -> str:
    (dest / "shared" / "1").mkdir(parents=True, exist_ok=True)
    (dest / "shared" / "1" / "model.py").write_text(MODEL_PY.format(weights=str(weights)))
    (dest / "shared" / "config.pbtxt").write_text(
        many.CONFIG.format(name="shared", backend=BACKENDS[system], count=n)
    )
    return "shared"


def need_bytes(key: tuple[str, str, int], n: int) -> float:
    """What N instances should take: a line through the last two sizes
    measured, one copy per instance from a single size, else the guess."""
    points = _measured.get(key, [])
    if len(points) >= 2:
        (n0, b0), (n1, b1) = points[-2:]
        per = max(0.0, (b1 - b0) / (n1 - n0))
        return b1 + per * (n - n1)
    if points:
        n0, b0 = points[-1]
        return b0 / n0 * n
    return (GUESS_MIB - 1024 + key[2]) * MiB * n


def _pss(pids: list[int]) -> int:
    return sum(pss_bytes(p) for p in pids)


def run(setup: many.Setup, *, n: int, requests: int = REQUESTS, mib: int = 1024) -> dict:
    """One run; the scenario's raw figures, or ``skipped`` with the reason."""
    system, variant = setup.system, setup.variant
    key = (system, variant, mib)
    need, have = need_bytes(key, n), many.available_bytes()
    if have - need < many.RESERVE_GIB * (1 << 30):
        return {
            "skipped": f"{n} instances need about {need / (1 << 30):.1f} GiB, "
            f"{have / (1 << 30):.1f} GiB are available "
            f"and {many.RESERVE_GIB:.0f} GiB must stay free"
        }
    if variant == "fork" and not many.knows_setting(setup.backends, "stub-fork"):
        return {"skipped": many.NO_FORK}
    where = setup.work / f"shared-{system}-{variant}-{n}"
    name = write_repository(where / "repo", system, n, weights_file(setup.work, mib))
    server = setup.server(where / "repo", where / "server.log")
    seen: set[int] = set()
    try:
        server.wait_ready()
        load_s, failed = many.load(server, [name], where)
        if failed:
            return {"ok": 0, "error": f"load: {failed}"}
        procs = descendants(server.proc.pid)
        seen.update(procs)
        pss = _pss(procs)
        _measured.setdefault(key, []).append((n, float(pss)))
        path = f"/v2/models/{name}/infer"
        script = loads.wrk_script(
            loads.json_body(name, ADD_SUB_INPUTS), setup.scripts / f"shared_{n}.lua"
        )
        r = loads.run_wrk(
            setup.wrk, server, script, path, conns=n, duration=setup.duration, warmup=setup.warmup
        )
        answered, errors = r["ok"], r["errors"]
        deadline = time.monotonic() + 600
        while answered < requests and time.monotonic() < deadline:
            more = loads.run_wrk(setup.wrk, server, script, path, conns=n, duration=3, warmup=0)
            answered, errors = answered + more["ok"], errors + more["errors"]
        procs = descendants(server.proc.pid)
        seen.update(procs)
        r.update(
            load_s=load_s,
            pss_mib=pss / MiB,
            pss_after_mib=_pss(procs) / MiB,
            answered=answered,
            errors=errors,
            server_rss_mib=rss_bytes(server.proc.pid) / MiB,
            processes=len(procs),
        )
        return r
    finally:
        seen.update(descendants(server.proc.pid))
        server.stop(timeout=300)
        many.wait_gone(seen)
        many.kill_strays(where)
