# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The per-stub caps on what a model makes the server hold (docs/hardening.md,
"Caps per stub"), met by a model that uses the model API only (caps_flood):
BLS calls in flight (stub-max-bls-calls) and their bytes (stub-max-bls-bytes)
fail those calls with an error naming the key, LOG lines past
stub-log-bytes-per-second are dropped and counted in a line of the server's
log. The stub is never killed for it, and the server keeps serving other
models. The default of stub-max-arena-bytes follows the machine's memory."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from checks import add_sub_works, ask
from server import TritonServer, build_repository, running

MODEL = "caps_flood"
MAX_CALLS = 8
MAX_BLS_BYTES = 16 << 20
LOG_RATE = 64 << 10


@pytest.fixture(scope="module")
def caps_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("caps")
    config = "--backend-config=tritonpy,"
    srv = TritonServer(
        build_repository(work / "repo", [MODEL, "caps_hold", "add_sub"]),
        work,
        args=[
            "--model-control-mode=explicit",
            "--load-model=*",
            f"{config}stub-max-bls-calls={MAX_CALLS}",
            f"{config}stub-max-bls-bytes={MAX_BLS_BYTES}",
            f"{config}stub-log-bytes-per-second={LOG_RATE}",
        ],
    )
    with running(srv):
        yield srv


def failure(srv: TritonServer, mode: str) -> str:
    """The error of a caps_flood request that must fail."""
    with pytest.raises(InferenceServerException) as e:
        ask(srv, mode, MODEL)
    return str(e.value)


def hold(srv: TritonServer, cmd: str) -> int:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        inp = httpclient.InferInput("CMD", [1], "BYTES")
        inp.set_data_from_numpy(np.array([cmd.encode()], dtype=object))
        return int(c.infer("caps_hold", [inp]).as_numpy("HELD")[0])
    finally:
        c.close()


def test_bls_calls_past_the_cap_fail_naming_the_key(caps_server: TritonServer) -> None:
    srv = caps_server
    pid = ask(srv, "ok", MODEL)
    n = MAX_CALLS + 12
    errors: list[str] = []
    flood = threading.Thread(target=lambda: errors.append(failure(srv, f"bls_many:{n}")))
    flood.start()
    try:
        # The first MAX_CALLS calls are held by caps_hold; the others were
        # answered at once. Meanwhile the server serves other models.
        assert srv.wait_log(f"caps_hold: holding {MAX_CALLS}", timeout=120), srv.log()[-3000:]
        add_sub_works(srv)
    finally:
        assert hold(srv, "release") == MAX_CALLS
        flood.join(timeout=120)
    assert not flood.is_alive()
    assert len(errors) == 1, errors
    msg = errors[0]
    assert f"{n - MAX_CALLS} of {n} BLS calls failed" in msg, msg
    assert (
        f"tritonpy: model '{MODEL}' instance '{MODEL}_0_0': BLS request to model 'caps_hold' "
        f"refused: {MAX_CALLS} BLS calls of this instance are in flight, the most "
        f"stub-max-bls-calls={MAX_CALLS} allows"
    ) in msg, msg
    assert "caps_hold: holding 9" not in srv.log()
    # Not a stub kill: the same process serves on, and the cap is free again.
    assert ask(srv, "ok", MODEL) == pid
    assert ask(srv, "bls_in:64", MODEL) == pid


def test_bls_bytes_past_the_cap_fail_naming_the_key(caps_server: TritonServer) -> None:
    srv = caps_server
    pid = ask(srv, "ok", MODEL)
    # Inputs: the call is refused before the server copies them.
    msg = failure(srv, f"bls_in:{MAX_BLS_BYTES + 1}")
    assert "1 of 1 BLS calls failed" in msg, msg
    assert "BLS request to model 'caps_hold' refused: its " in msg, msg
    assert f"past stub-max-bls-bytes={MAX_BLS_BYTES}" in msg, msg
    # Outputs: the output the callee answers is refused its BLS arena space.
    msg = failure(srv, f"bls_out:{MAX_BLS_BYTES + 8}")
    assert "BLS output 'HELD'" in msg, msg
    assert f"past stub-max-bls-bytes={MAX_BLS_BYTES}" in msg, msg
    add_sub_works(srv)
    # Just under the cap, both ways, works; the stub was never restarted.
    assert ask(srv, f"bls_in:{MAX_BLS_BYTES - 64}", MODEL) == pid
    assert ask(srv, f"bls_out:{MAX_BLS_BYTES - 64}", MODEL) == pid
    assert ask(srv, "ok", MODEL) == pid


DROPPED = re.compile(
    rf"tritonpy: model '{MODEL}' instance '{MODEL}_0_0': dropped (\d+) log lines? "
    rf"\(\d+\.\d MB\) over stub-log-bytes-per-second={LOG_RATE}"
)


def test_a_log_flood_is_cut_to_the_rate_and_counted(caps_server: TritonServer) -> None:
    srv = caps_server
    lines = 4000
    pid = ask(srv, "ok", MODEL)
    start = srv.log_size()
    assert ask(srv, f"log:{lines}:1000", MODEL) == pid
    # The first drop is reported at once.
    assert srv.wait_log("dropped 1 log line (0.0 MB)", timeout=60, after=start)
    add_sub_works(srv)
    assert ask(srv, "ok", MODEL) == pid
    # The rest is reported at the latest when the stub goes away.
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    try:
        c.unload_model(MODEL)
        assert srv.wait_log(f"successfully unloaded '{MODEL}'", timeout=120, after=start)
        log = srv.log()[start:]
        passed = log.count("caps-flood-line")
        dropped = sum(int(n) for n in DROPPED.findall(log))
        assert passed + dropped == lines, (passed, dropped)
        # A burst of 4 s of the rate, then the rate: far from all of them.
        assert 0 < passed < lines * 3 // 8, (passed, dropped)
        add_sub_works(srv)
    finally:
        c.load_model(MODEL)
        c.close()
    assert ask(srv, "ok", MODEL) != pid


def test_arena_bytes_default_follows_the_machine_memory(tmp_path: Path) -> None:
    """Without stub-max-arena-bytes the backend takes the memory it may use
    (the physical memory, or its cgroup's limit when lower) instead of a
    fixed 256 GiB, and stub-max-bls-bytes a quarter of it; the log says
    both and where they come from."""
    srv = TritonServer(build_repository(tmp_path / "repo", ["add_sub"]), tmp_path)
    with running(srv):
        m = re.search(
            r"stub-max-arena-bytes=(\d+) stub-max-bls-calls=4096 stub-max-bls-bytes=(\d+) "
            r"stub-log-bytes-per-second=4194304 \(physical memory (\d+) bytes, ",
            srv.log(),
        )
        assert m, srv.log()[-3000:]
        arena, bls, physical = (int(x) for x in m.groups())
        assert physical == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        assert 0 < arena <= physical
        assert bls == arena // 4
        add_sub_works(srv)
