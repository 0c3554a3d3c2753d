# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Model code that forges frames past the backend's limits on what a stub
may make it map or decode (docs/hardening.md, "Limits and arenas"): the
stub is killed and restarted, its request fails naming the limit and its
key, tritonserver stays live and ready, add_sub keeps serving, and the
server keeps no mapping or descriptor of the forged arenas."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from checks import add_sub_works, ask, wait_for_new_stub
from server import TritonServer, build_repository, open_files, running

MODEL = "hostile_limits"
MAX_ARENAS = 32  # set below the default, to show the key is read


@pytest.fixture(scope="module")
def limits_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("hostile_limits")
    srv = TritonServer(
        build_repository(work / "repo", [MODEL, "add_sub"]),
        work,
        args=[f"--backend-config=tritonpy,stub-max-arenas={MAX_ARENAS}"],
    )
    with running(srv):
        yield srv


def forged_in_server(server: TritonServer) -> tuple[int, int]:
    """Mappings and descriptors of the server that are forged memfds."""
    pid = server.proc.pid
    with open(f"/proc/{pid}/maps") as f:
        maps = sum("memfd:hostile-limits" in line for line in f)
    return maps, sum("memfd:hostile-limits" in t for t in open_files(pid))


def arena_bytes(server: TritonServer) -> int:
    """The server's stub-max-arena-bytes (its default follows the machine's
    memory), from the settings it logs at start-up."""
    m = re.search(r"stub-max-arena-bytes=(\d+)", server.log())
    assert m, server.log()[-3000:]
    return int(m.group(1))


# mode -> what the error must say (the limit and its key, or the check);
# {arena}: the server's stub-max-arena-bytes.
FORGERIES = {
    "arenas": f"past stub-max-arenas={MAX_ARENAS}",
    "arena_bytes": "past stub-max-arena-bytes={arena}",
    "body": "larger than stub-max-body-bytes=67108864",
    "bls": "add up to more than stub-max-arena-bytes={arena}",
    "unsealed": "is not sealed against shrinking (F_SEAL_SHRINK)",
    "hugetlb": "is not a memfd on tmpfs",
    "channel_memfd": "a BLS_CHANNEL frame must carry exactly one AF_UNIX SOCK_SEQPACKET socket",
    "channel_stream": "is not a memfd on tmpfs (nor a unix SEQPACKET socket",
    "socket_on_log": "a LOG frame carried file descriptors",
}


@pytest.mark.parametrize("mode", FORGERIES)
def test_a_forgery_past_a_limit_kills_only_that_stub(
    limits_server: TritonServer, mode: str
) -> None:
    pid = ask(limits_server, "ok", MODEL)
    assert forged_in_server(limits_server) == (0, 0)
    try:
        answer = ask(limits_server, mode, MODEL)
    except InferenceServerException as e:
        msg = str(e)
    else:
        assert mode == "hugetlb" and answer == -1, (mode, answer)
        pytest.skip("this kernel makes no hugetlbfs memfd")
    assert "tritonpy protocol violation" in msg, msg
    assert FORGERIES[mode].format(arena=arena_bytes(limits_server)) in msg, msg
    assert f"model '{MODEL}'" in msg, msg
    assert limits_server._get("/v2/health/live") == 200
    assert limits_server._get("/v2/health/ready") == 200
    add_sub_works(limits_server)
    assert wait_for_new_stub(limits_server, pid, timeout=60, model=MODEL) != pid
    assert forged_in_server(limits_server) == (0, 0)
    add_sub_works(limits_server)


def test_an_honest_output_past_the_arena_limit_fails_without_a_restart(
    tmp_path: Path,
) -> None:
    """The backend tells the stub its limits: an output that would take the
    stub's arenas past stub-max-arena-bytes fails that request, and the
    stub serves on (the same process), instead of announcing the arena and
    being killed for it."""
    srv = TritonServer(
        build_repository(tmp_path / "repo", [MODEL]),
        tmp_path,
        args=[f"--backend-config=tritonpy,stub-max-arena-bytes={16 << 20}"],
    )
    with running(srv):
        pid = ask(srv, "ok", MODEL)
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=60)
        try:

            def big(n: int) -> np.ndarray:
                mode = httpclient.InferInput("MODE", [1], "BYTES")
                mode.set_data_from_numpy(np.array([f"big:{n}".encode()], dtype=object))
                out = httpclient.InferRequestedOutput("PID", binary_data=True)
                return c.infer(MODEL, [mode], outputs=[out]).as_numpy("PID")

            # 8 MiB fits (in an arena of 8 MiB: one of the default 64 MiB
            # would not); the 8 MiB arena cannot hold 12, nor is there room
            # for another of 12.
            assert big(8 << 20).tolist() == [pid] * (1 << 20)
            with pytest.raises(InferenceServerException) as e:
                big(12 << 20)
            assert "stub-max-arena-bytes=16777216" in str(e.value), e.value
            assert "protocol violation" not in str(e.value), e.value
            assert big(64).tolist() == [pid] * 8
        finally:
            c.close()
        assert ask(srv, "ok", MODEL) == pid
