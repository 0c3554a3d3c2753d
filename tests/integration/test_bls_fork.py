# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Sync BLS from processes a model forks (a multiprocessing pool inside
execute(), as Triton's own BLS tests do): every child's exec() gets its
own answer, and the model and the server serve on afterwards.

Known gap: forked children share the stub's socket and inherit its BLS call
counter, so two children send the same call id (the backend then kills the
stub for a protocol violation) and a child's answer may be read by another
process. One child at a time works."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient

from server import TritonServer, build_repository, explicit, running

MODELS = ["add_sub", "bls_pool"]


@pytest.fixture(scope="module")
def pool_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("bls_fork")
    srv = TritonServer(build_repository(work / "repo", MODELS), work, args=explicit(MODELS))
    with running(srv):
        yield srv


def _sums(srv: TritonServer, count: int) -> np.ndarray:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120.0)
    try:
        inp = httpclient.InferInput("COUNT", [1], "INT32")
        inp.set_data_from_numpy(np.array([count], np.int32))
        return c.infer("bls_pool", [inp]).as_numpy("SUMS")
    finally:
        c.close()


@pytest.mark.parametrize(
    "count",
    [
        1,
        pytest.param(
            10,
            # Not strict: children that happen to run one after another pass.
            marks=pytest.mark.xfail(
                reason="forked children share the stub's BLS call ids and socket"
            ),
        ),
    ],
)
def test_children_of_a_model_each_get_their_own_bls_answer(
    pool_server: TritonServer, count: int
) -> None:
    sums = _sums(pool_server, count)
    assert sums.tolist() == [2.0 * n for n in range(1, count + 1)]


def test_the_model_serves_again_after_its_children_called(pool_server: TritonServer) -> None:
    # Runs after the cases above, whatever became of the instance there.
    assert _sums(pool_server, 1).tolist() == [2.0]
