# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A stub under an address-space limit (stub_sandbox_address_space_bytes)
is never asked to map more of the backend's arenas than half of it: a
request whose input alone passes that gets an error naming the model, the
request and the tensor, and reaches no stub. An arena within that half
that the stub still cannot map (its own memory took the rest) fails the
requests with inputs in it, and only them: the stub serves on, and no
arena is announced again to a stub that would die of it.
(docs/hardening.md, "Limits and arenas".)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from server import TritonServer, build_repository, explicit, running

MODEL = "arena_room"
TIGHT = "arena_room_tight"
MIB = 1 << 20
# What the tight stub's address-space limit leaves it above what the
# model measured in use: less than an arena for a 128 MiB input (256 MiB).
HEADROOM = 160 * MIB
UNMAPPABLE = 128 * MIB


def infer(srv: TritonServer, model: str, nbytes: int, request_id: str) -> dict[str, int]:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=300)
    try:
        big = httpclient.InferInput("BIG", [nbytes], "UINT8")
        big.set_data_from_numpy(np.zeros(nbytes, np.uint8), binary_data=True)
        r = c.infer(model, [big], request_id=request_id)
        return {k: int(r.as_numpy(k)[0]) for k in ("TOKEN", "BYTES", "VM")}
    finally:
        c.close()


def refused(srv: TritonServer, model: str, nbytes: int, request_id: str) -> str:
    with pytest.raises(InferenceServerException) as e:
        infer(srv, model, nbytes, request_id)
    return str(e.value)


def test_arenas_stay_within_what_a_limited_stub_can_map(tmp_path: Path) -> None:
    repo = build_repository(tmp_path / "repo", [MODEL])
    with running(TritonServer(repo, tmp_path, args=explicit([MODEL]))) as srv:
        in_use = infer(srv, MODEL, 16, "measure")["VM"]
        assert in_use > 0
        limit = (in_use + HEADROOM) // 4096 * 4096
        (repo / TIGHT / "1").mkdir(parents=True)
        (repo / TIGHT / "1" / "model.py").write_bytes(
            (repo / MODEL / "1" / "model.py").read_bytes()
        )
        config = (repo / MODEL / "config.pbtxt").read_text().replace(f'"{MODEL}"', f'"{TIGHT}"')
        config += (
            'parameters { key: "stub_sandbox_address_space_bytes" '
            f'value {{ string_value: "{limit}" }} }}\n'
        )
        (repo / TIGHT / "config.pbtxt").write_text(config)
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        try:
            c.load_model(TIGHT)
        finally:
            c.close()
        token = infer(srv, TIGHT, 16, "first")["TOKEN"]

        # An arena the backend may make (within half the limit) that the
        # stub cannot map: that request fails, naming what it was.
        msg = refused(srv, TIGHT, UNMAPPABLE, "req-unmappable")
        assert f"model '{TIGHT}' request 'req-unmappable': input 'BIG' of {UNMAPPABLE} bytes" in msg
        assert "could not be mapped in the stub" in msg, msg
        assert "stub-sandbox-address-space-bytes" in msg, msg
        # The same stub serves on.
        again = infer(srv, TIGHT, 16, "after-unmappable")
        assert again["TOKEN"] == token and again["BYTES"] == 16

        # An input larger than half the limit: refused by the backend,
        # before any stub sees it, with the official text first.
        too_large = limit // 2 + MIB
        msg = refused(srv, TIGHT, too_large, "req-too-large")
        assert (
            msg.find(
                "Failed to increase the shared memory pool size: tritonpy: "
                f"model '{TIGHT}' request 'req-too-large': input 'BIG' of {too_large} bytes: "
                f"{too_large} bytes are more than the stub can map"
            )
            >= 0
        ), msg
        assert f"may take {limit // 2} bytes" in msg, msg
        assert infer(srv, TIGHT, 16, "after-too-large")["TOKEN"] == token
        # The other model, without a limit, was never touched.
        assert infer(srv, MODEL, 16, "other")["BYTES"] == 16
