# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A blocking BLS exec() whose model asks for a spin far longer than the
call's timeout (bls_spin_microseconds, docs/bls.md): the call still times
out with the usual error when its timeout says, and the stub serves on."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from checks import X, Y, add_sub_inputs
from server import TritonServer, build_repository, explicit, running

MODELS = ["add_sub", "async_sleep", "bls_add_sub"]
# Ten minutes of spin: a spin bounded by this alone would still be running
# when the target answers (60 s at the earliest), and the call would succeed.
SPIN = 'parameters: { key: "bls_spin_microseconds" value: { string_value: "600000000" } }\n'
# bls_add_sub's target "async_sleep" runs this model here (same inputs and
# output): it answers only once its request is cancelled (or after 60 s), so
# the call's timeout wins however long the machine stalls.
HELD = Path(__file__).parent / "models" / "async_until_cancelled" / "1" / "model.py"


@pytest.fixture(scope="module")
def spin_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("bls_spin")
    repo = build_repository(work / "repo", MODELS)
    with open(repo / "bls_add_sub" / "config.pbtxt", "a") as config:
        config.write(SPIN)
    shutil.copy(HELD, repo / "async_sleep" / "1" / "model.py")
    with running(TritonServer(repo, work, args=explicit(MODELS))) as srv:
        yield srv


def test_a_long_spin_times_out_with_the_call(spin_server: TritonServer) -> None:
    c = httpclient.InferenceServerClient(spin_server.http_url, network_timeout=60)
    try:
        # async_sleep (here async_until_cancelled) does not answer before
        # the call is cancelled: only the call's timeout (100 ms, and the
        # stub's second past it) ends the call.
        with pytest.raises(InferenceServerException, match="BLS call timed out"):
            c.infer(
                "bls_add_sub",
                add_sub_inputs(
                    X,
                    Y,
                    TARGET=np.array([b"async_sleep"], object),
                    TIMEOUT_US=np.array([100_000], np.int64),
                ),
            )
        # The stub cancelled the call, which let the target go.
        seen = "async_until_cancelled: request '' cancelled=True"
        assert spin_server.wait_log(seen, timeout=60), spin_server.log()[-3000:]
        # The same instance serves on, its calls spinning again.
        for _ in range(3):
            r = c.infer("bls_add_sub", add_sub_inputs(X, Y))
            assert np.allclose(r.as_numpy("OUTPUT0"), X + Y)
            assert np.allclose(r.as_numpy("OUTPUT1"), X - Y)
    finally:
        c.close()
