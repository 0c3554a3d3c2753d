# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""is_ready() in a real stub, driven over the real protocol: it answers
while a sync execute holds the loop, a non-bool answer is "not ready" with
the official text, and queries that arrive during a call share it.

(Tritonserver 2.51 never asks a backend for instance readiness, so no
endpoint of the real server reaches is_ready(): docs/engine.md.)"""

from __future__ import annotations

import time
from pathlib import Path

import protocol_ref as P
from host import StubHost

NOT_A_BOOL = "is_ready() must return a boolean value"


def wait_file(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_is_ready_answers_while_a_sync_execute_holds_the_loop(
    host: StubHost, tmp_path: Path
) -> None:
    started, release = tmp_path / "started", tmp_path / "release"
    host.load(
        tmp_path,
        f"""
        import os, time
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                open({str(started)!r}, "w").close()
                while not os.path.exists({str(release)!r}):
                    time.sleep(0.01)
                return [pb_utils.InferenceResponse([]) for _ in requests]
            def is_ready(self):
                return True
    """,
        settings={"sync_prefetch_batches": 0},
    )
    host.send(P.encode(P.EXECUTE, {"requests": [P.request("r")]}, id=1))
    wait_file(started)
    host.send(P.encode(P.IS_READY, {}, id=5))
    # The execute has not returned (release does not exist yet): the
    # answer comes while it runs.
    reply = host.recv_type("READY")
    assert reply["id"] == 5 and reply["body"]["ready"] == 1, reply
    release.touch()
    answer = host.recv_type("RESPONSES")["body"]["responses"]
    assert [e["batch_id"] for e in answer] == [1]


def test_an_answer_that_is_not_a_bool_is_not_ready(host: StubHost, tmp_path: Path) -> None:
    host.load(
        tmp_path,
        """
        class TritonPythonModel:
            def execute(self, requests):
                return []
            def is_ready(self):
                return 1
    """,
    )
    host.send(P.encode(P.IS_READY, {}, id=3))
    reply = host.recv_type("READY")
    assert reply["body"]["ready"] == 0, reply
    assert reply["body"]["message"].startswith(NOT_A_BOOL), reply
    assert "int" in reply["body"]["message"]


def test_queries_during_a_call_share_its_answer(host: StubHost, tmp_path: Path) -> None:
    calls, release = tmp_path / "calls", tmp_path / "release"
    host.load(
        tmp_path,
        f"""
        import os, time
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse([]) for _ in requests]
            def is_ready(self):
                with open({str(calls)!r}, "a") as f:
                    f.write("call\\n")
                while not os.path.exists({str(release)!r}):
                    time.sleep(0.01)
                return True
    """,
    )
    host.send(P.encode(P.IS_READY, {}, id=1))
    wait_file(calls)
    host.send(P.encode(P.IS_READY, {}, id=2))
    host.send(P.encode(P.IS_READY, {}, id=3))
    # The stub handles frames in order: once this batch is answered, it
    # has taken queries 2 and 3 while the first call still runs.
    assert host.execute(9, [P.request("x")])["id"] == 9
    release.touch()
    answers = {}
    while len(answers) < 3:
        reply = host.recv_type("READY")
        answers[reply["id"]] = reply["body"]["ready"]
    assert answers == {1: 1, 2: 1, 3: 1}
    assert calls.read_text() == "call\n"  # one call answered all three
