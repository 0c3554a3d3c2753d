# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The probe of an environment's interpreter is untrusted code, bounded in
time whatever the interpreter leaves behind, in a process group killed as
a whole. Through a real tritonserver (in the sandbox, with the allowlisted
environment): tests/integration/test_env_probe.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tritonpy import exec_env as env
from tritonpy.exec_env import probe as env_probe


def hostile_interpreter(root: Path, body: str) -> Path:
    (root / "bin").mkdir(parents=True)
    python = root / "bin" / "python3"
    python.write_text("#!/bin/sh\n" + body)
    python.chmod(0o755)
    return python


def test_a_probe_that_leaves_a_process_on_its_pipes_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interpreter starts a process in a session of its own that keeps
    its stdout and stderr, then sleeps: the probe ends at its time limit,
    the interpreter's process group is killed, and the leftover process
    (out of the group's reach, as documented) does not hold it up."""
    marker = tmp_path / "leftover.pid"
    python = hostile_interpreter(
        tmp_path / "e", f"setsid sh -c 'echo $$ > {marker}; exec sleep 3600' &\nexec sleep 3600\n"
    )
    monkeypatch.setattr(env_probe, "PROBE_TIMEOUT", 2.0)
    start = time.monotonic()
    try:
        with pytest.raises(
            env.EnvError, match=r"did not answer within 2 s \(stub-timeout-seconds\)"
        ):
            env_probe.probe(python)
        assert time.monotonic() - start < 30
    finally:
        if marker.exists():
            os.kill(int(marker.read_text()), signal.SIGKILL)


def test_a_probe_whose_leftover_holds_the_pipes_still_answers(tmp_path: Path) -> None:
    """The interpreter answers and exits, leaving a process on its pipes:
    the answer is read without waiting for the pipes' end."""
    marker = tmp_path / "leftover.pid"
    python = hostile_interpreter(
        tmp_path / "e",
        f"setsid sh -c 'echo $$ > {marker}.new; mv {marker}.new {marker}; exec sleep 3600' &\n"
        # Answers once the leftover is in its own session.
        f"while [ ! -e {marker} ]; do sleep 0.05; done\n"
        'echo \'{"version": [3, 0], "modules": {}}\'\n',
    )
    try:
        start = time.monotonic()
        assert env_probe.probe(python) == {"version": [3, 0], "modules": {}}
        assert time.monotonic() - start < 30
    finally:
        if marker.exists():
            os.kill(int(marker.read_text()), signal.SIGKILL)


def test_what_the_probe_started_in_its_group_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    python = hostile_interpreter(tmp_path / "e", f"sleep 3600 &\necho $! > {marker}\necho '{{}}'\n")
    assert env_probe.probe(python) == {}
    child = int(marker.read_text())
    deadline = time.monotonic() + 30
    while _alive(child):
        assert time.monotonic() < deadline, f"{child} still runs"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_run_bounded_keeps_a_bounded_output(tmp_path: Path) -> None:
    code, out, err = env_probe.run_bounded(
        [
            sys.executable,
            "-c",
            "import sys; sys.stdout.write('x' * (3 << 20)); print('e', file=sys.stderr)",
        ],
        60,
    )
    assert code == 0 and len(out) == 1 << 20 and err == "e\n"
    with pytest.raises(subprocess.TimeoutExpired):
        env_probe.run_bounded(["sleep", "3600"], 0.5)
