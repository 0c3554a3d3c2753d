# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The probe of an execution environment's interpreter (run when a model
with EXECUTION_ENV_PATH loads) is untrusted code: through a real
tritonserver it runs as the model's stubs would, in the model's sandbox
with the allowlisted environment, and within stub-timeout-seconds, in a
process group killed as a whole. An interpreter that leaves a process
holding its pipes and sleeps fails the load at that limit instead of
holding Triton's load thread for good. (docs/hardening.md, "Execution
environments".)"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from checks import add_sub_works
from environments import write_model
from server import TritonServer, build_repository, load_failure, running

# stub-timeout-seconds of the server: it bounds the probe, and also how
# long add_sub's stub (and the stub template) may take to start, which a
# busy machine can stretch to seconds. Loading "holder" takes at least this.
TIMEOUT = 20
DEADLINE = TIMEOUT + 60.0


def hostile_env(root: Path, script: str) -> Path:
    (root / "bin").mkdir(parents=True)
    python = root / "bin" / "python3"
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(0o755)
    return root


def kill_marked(marker: Path) -> None:
    if marker.exists():
        for line in marker.read_text().split():
            try:
                os.kill(int(line), signal.SIGKILL)
            except (ValueError, OSError):
                pass


def test_the_probe_is_sandboxed_allowlisted_and_bounded(tmp_path: Path) -> None:
    facts = tmp_path / "facts"
    facts.mkdir(mode=0o777)
    leftover = tmp_path / "leftover.pids"
    # Keeps the pipes from a session of its own, then sleeps: the load must
    # fail at the time limit, not wait for the pipes' end.
    holder = hostile_env(
        tmp_path / "holder_env",
        f"setsid sh -c 'echo $$ >> {leftover}; exec sleep 3600' &\nexec sleep 3600\n",
    )
    # Writes down what it sees, then answers nothing.
    spy = hostile_env(
        tmp_path / "spy_env",
        f"echo $$ > {facts}/pid\nls /proc > {facts}/proc\nenv > {facts}/env\n"
        f"id -ru > {facts}/uid\n",
    )
    repo = build_repository(tmp_path / "repo", ["add_sub"])
    write_model(repo, "holder", str(holder))
    write_model(repo, "spy", str(spy))
    with open(repo / "spy" / "config.pbtxt", "a") as f:
        f.write('parameters { key: "stub_sandbox" value { string_value: "true" } }\n')
    args = [
        "--model-control-mode=explicit",
        "--load-model=add_sub",
        f"--backend-config=tritonpy,stub-timeout-seconds={TIMEOUT}",
        "--backend-config=tritonpy,stub-env-allowlist=PATH,HOME,TRITONPY_*",
        # Where the sandboxed model's environment may lie.
        f"--backend-config=tritonpy,stub-sandbox-read-paths={spy}",
    ]
    srv = TritonServer(repo, tmp_path, args=args, prefix=["env", "CLOUD_SECRET=1"])
    try:
        with running(srv):
            messages: list[str] = []
            loader = threading.Thread(
                target=lambda: messages.append(load_failure(srv, "holder")), daemon=True
            )
            start = time.monotonic()
            loader.start()
            loader.join(DEADLINE)
            assert not loader.is_alive(), "the load waits on the probe's pipes"
            assert time.monotonic() - start >= TIMEOUT
            assert f"did not answer within {TIMEOUT} s (stub-timeout-seconds)" in messages[0]
            add_sub_works(srv)

            message = load_failure(srv, "spy")
            assert "gave an unexpected answer" in message, message
            # Pid 2 of its own pid namespace (the helper is pid 1), seeing
            # only that namespace's processes, without the server's secret.
            pid = int((facts / "pid").read_text())
            seen = [e for e in (facts / "proc").read_text().split() if e.isdigit()]
            env = (facts / "env").read_text()
            assert pid < 10 and len(seen) < 5, (pid, seen)
            assert "CLOUD_SECRET" not in env and "PATH=" in env, env
            # With the allowlist set, no warning about the environment.
            assert "stub-env-allowlist is not set" not in srv.log()
            if os.geteuid() == 0:  # as a root server's sandboxed stub: another real uid
                assert (facts / "uid").read_text().strip() == "1"
            add_sub_works(srv)
    finally:
        kill_marked(leftover)
