# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A model that resizes its numpy array in place (``arr.resize(...,
refcheck=False)``) after making ``pb_utils.Tensor("OUT", arr)``, then
returns that Tensor. An output's dims are those its Tensor was made with,
so the bytes sent disagree with them: the backend refuses that output
with an error naming the model, the request and the output, and the byte
size it names is the array's real one (the stub neither read past the
array's bytes nor cut them to the dims). The other request of the batch
is answered, the stub lives on, and the next batch of the model is
answered by the same stub.

Both requests of a pair go out at once; the model's batch is full at two
(resized_output/config.pbtxt), so they share one execute (BATCH says so)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from checks import add_sub_works
from server import TritonServer, build_repository, running

MODEL = "resized_output"
LARGE = 1 << 16  # 256 KiB of FP32: past the inline limit, through an arena


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("resized_output")
    with running(TritonServer(build_repository(work / "repo", [MODEL, "add_sub"]), work)) as srv:
        yield srv


def pair(server: TritonServer, modes: tuple[str, str]) -> list[dict | str]:
    """Sends both modes at once (request ids "<mode>"); per request its
    outputs (OUT, BATCH, PID as lists) or its error's text."""
    c = httpclient.InferenceServerClient(server.http_url, concurrency=2, network_timeout=60)
    try:
        pending = []
        for mode in modes:
            inp = httpclient.InferInput("MODE", [1, 1], "BYTES")
            inp.set_data_from_numpy(np.array([[mode.encode()]], dtype=object))
            pending.append(c.async_infer(MODEL, [inp], request_id=mode))
        got: list[dict | str] = []
        for p in pending:
            try:
                r = p.get_result()
            except InferenceServerException as e:
                got.append(str(e))
            else:
                got.append({k: r.as_numpy(k).tolist() for k in ("OUT", "BATCH", "PID")})
        return got
    finally:
        c.close()


def answered(got: dict | str) -> dict:
    assert isinstance(got, dict), got
    assert got["OUT"] == [[0.0, 1.0, 2.0, 3.0]] and got["BATCH"] == [[2]], got
    return got


@pytest.mark.parametrize(
    ("made", "resized"),
    [
        (4, 8),  # grown, inline both
        (4, 1),  # shrunk
        (4, 0),  # emptied
        (4, LARGE),  # grown past the inline limit
        (LARGE, 2),  # shrunk below it
        (LARGE, 2 * LARGE),  # grown, through an arena both
    ],
)
def test_an_array_resized_under_its_tensor_is_refused_alone(
    server: TritonServer, made: int, resized: int
) -> None:
    mode = f"{made}->{resized}"
    bad, good = pair(server, (mode, "ok"))
    assert isinstance(bad, str), bad
    assert (
        f"tritonpy: model '{MODEL}' request '{mode}': output 'OUT' has byte_size "
        f"{4 * resized} but shape [1,{made}] needs {4 * made}"
    ) in bad, bad
    pid = answered(good)["PID"]

    after = pair(server, ("ok", "ok"))  # the next batch: the same stub
    assert [answered(a)["PID"] for a in after] == [pid, pid]
    add_sub_works(server)
