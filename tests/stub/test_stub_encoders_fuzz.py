# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Property tests of the stub's encoders near the frame size limits: a
model (as honest as any, and as any quoting what a client sent) answers
with a text or a value of a size around the limits (the 64 KiB inline
tensor, MAX_FRAME, far past it) and of 1- to 4-byte UTF-8 characters: an
exception, an error response, a log line, response parameters, a BYTES
output. Every frame the stub sends must be one the backend takes (at most
MAX_FRAME, its body in an arena when larger; the test host decodes each
with the reference codec), carry the text whole (a text, as
docs/protocol.md allows, may instead be cut with a visible "truncated"
marker), and the stub must serve on.

The examples come from the suite's fixed fuzz seed (tests/fuzz_seed.py);
Hypothesis prints a failing example."""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import protocol_ref as P
from fuzz_seed import SEED
from host import StubHost, write_model

TEXTS = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            p = json.loads(r.parameters() or "{}")
            text = p.get("char", "") * p.get("size", 0)
            kind = p.get("kind", "ok")
            if kind == "raise":
                raise ValueError(text)
            if kind == "log":
                pb_utils.Logger.log_info(text)
                out.append(pb_utils.InferenceResponse([]))
            elif kind == "error":
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(text)))
            elif kind == "params":
                out.append(pb_utils.InferenceResponse([], parameters={"p": text}))
            elif kind == "bytes":
                value = np.array([text.encode()], dtype=object)
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", value)]))
            else:
                out.append(pb_utils.InferenceResponse([]))
        return out
"""

# Sizes (in characters) around the limits a frame's encoder meets.
EDGES = [0, 1, 65536 - 64, 65536, 65536 + 8, P.MAX_FRAME - 200, P.MAX_FRAME - 40]
EDGES += [P.MAX_FRAME - 24, P.MAX_FRAME, P.MAX_FRAME + 1, 300_000]
sizes = st.one_of(
    st.sampled_from(EDGES).flatmap(lambda n: st.integers(max(0, n - 8), n + 8)),
    st.integers(0, 400_000),
)
# 1-, 2-, 3- and 4-byte UTF-8, and a NUL.
chars = st.sampled_from(["x", "\u00e9", "\u20ac", "\U0001d11e", "\0"])
kinds = st.sampled_from(["raise", "error", "log", "params", "bytes"])


class Stubs:
    """The module's stub, started anew after an example that failed (its
    socket may hold frames of that example)."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        self.host: StubHost | None = None

    def get(self) -> StubHost:
        if self.host is None:
            self.host = StubHost()
            assert self.host.handshake(self.model_dir)["ok"] is True
        return self.host

    def drop(self) -> None:
        if self.host is not None:
            self.host.close()
            self.host = None


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stubs]:
    s = Stubs(write_model(tmp_path_factory.mktemp("texts"), TEXTS))
    try:
        yield s
    finally:
        s.drop()


def strings(obj: Any) -> Iterator[str]:
    """Every string in a decoded frame."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def carries(found: list[str], text: str) -> bool:
    """Whether one of ``found`` is ``text`` whole, or its start cut with a
    visible marker."""
    head = text[:1024]
    return any(text in s or (head in s and "truncated" in s) for s in found)


BATCH_IDS = itertools.count(1)


@seed(SEED)
@settings(
    max_examples=60,
    deadline=None,
    database=None,
    # No shrinking: every example costs a stub round trip, and the first
    # failing one already names the kind, size and character.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kind=kinds, size=sizes, char=chars)
def test_texts_and_values_of_any_size_reach_the_backend(
    stubs: Stubs, kind: str, size: int, char: str
) -> None:
    try:
        answered(stubs.get(), kind, char * size)
    except BaseException:
        stubs.drop()
        raise


def answered(host: StubHost, kind: str, text: str) -> None:
    """``host``'s model answers ``kind`` of ``text``, in frames the backend
    takes, and then the next request."""
    size, char = len(text), text[:1]
    params = json.dumps({"kind": kind, "size": size, "char": char})
    logs_before = len(host.logs)
    reply = host.execute(next(BATCH_IDS), [P.request("r", parameters=params)])
    if kind == "raise":
        assert reply["type"] == "EXECUTE_DONE" and not reply["body"]["ok"], reply["type"]
        assert carries([reply["body"]["error"]], text), len(reply["body"]["error"])
    else:
        assert reply["type"] == "RESPONSES", reply["type"]
        (entry,) = reply["body"]["responses"]
        if kind == "error":
            assert entry["has_error"] and carries([entry["error_message"]], text)
        elif kind == "params":
            assert json.loads(entry["parameters"]) == {"p": text}
        elif kind == "bytes":
            (out,) = entry["outputs"]
            raw = text.encode()
            assert host.tensor_bytes(out) == struct.pack("<I", len(raw)) + raw
        else:
            host.execute(next(BATCH_IDS), [P.request("after-log")])
            logs = [str(body.get("message", "")) for body in host.logs[logs_before:]]
            assert carries(logs, text), [len(m) for m in logs]
    # The stub serves on.
    after = host.execute(next(BATCH_IDS), [P.request("next")])
    assert after["type"] == "RESPONSES" and not after["body"]["responses"][0]["has_error"]
