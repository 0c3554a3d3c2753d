# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The spare of the template of sandboxed stubs (docs/hardening.md, "Stub
templates"): after each sandboxed fork the template clones the next
sandboxed child ahead, in namespaces of its own; the next load takes it,
it serves one stub only, and one that is not taken is reaped."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

from test_sandbox_confines import probe
from test_sandbox_tightens import SANDBOX, with_parameters

from checks import add_sub_works
from server import (
    TritonServer,
    alive,
    build_repository,
    children,
    running,
    wait_gone,
    wait_until,
)

MODELS = ["add_sub"]
VERBOSE = ["--model-control-mode=explicit", "--log-verbose=1", *SANDBOX]


def made(srv: TritonServer, after: int = 0) -> list[int]:
    return [int(p) for p in re.findall(r"made a spare, pid (\d+)", srv.log()[after:])]


def taken(srv: TritonServer, after: int = 0) -> list[int]:
    return [int(p) for p in re.findall(r"forked stub pid (\d+) from its spare", srv.log()[after:])]


def state(srv: TritonServer, model: str) -> str:
    _, body = srv.request("POST", "/v2/repository/index", b"{}")
    return next((m.get("state", "") for m in json.loads(body) if m["name"] == model), "")


def load(srv: TritonServer) -> list[int]:
    """Loads add_sub; its stubs."""
    code, body = srv.request("POST", "/v2/repository/models/add_sub/load", b"")
    assert code == 200, body
    return srv.stubs()


def unload(srv: TritonServer) -> None:
    stubs = srv.stubs()
    code, body = srv.request("POST", "/v2/repository/models/add_sub/unload", b"")
    assert code == 200, body
    wait_until(lambda: state(srv, "add_sub") == "UNAVAILABLE")
    assert wait_gone(stubs) == []


def namespace(pid: int, kind: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{kind}")


def mounts(pid: int) -> dict[str, str]:
    """Mount point -> file system type, as the process ``pid`` sees them
    (the last mount on a point wins)."""
    with open(f"/proc/{pid}/mountinfo") as f:
        return {line.split()[4]: line.split(" - ")[1].split()[0] for line in f}


def held_by(pid: int) -> dict[int, str]:
    """The descriptors of ``pid`` and what each refers to."""
    held = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass  # closed meanwhile
    return held


def only_its_own(held: dict[int, str]) -> bool:
    """Beyond 0-2: one socket, and at most its Landlock ruleset."""
    beyond = [link for fd, link in held.items() if fd > 2]
    sockets = [link for link in beyond if link.startswith("socket:")]
    return len(sockets) == 1 and set(beyond) - set(sockets) <= {"anon_inode:[landlock-ruleset]"}


def test_a_sandboxed_load_takes_the_spare_and_the_next_takes_another(tmp_path: Path) -> None:
    repo = build_repository(tmp_path / "repo", MODELS)
    with running(TritonServer(repo, tmp_path, args=VERBOSE)) as srv:
        (first,) = load(srv)
        assert taken(srv) == []  # no spare before the first sandboxed fork
        # Cloned ahead: its own namespaces, not a stub, holding no
        # descriptor of the template's or the server's but its socket pair
        # (and, once it built the common part of its root, its Landlock
        # ruleset).
        wait_until(lambda: len(children(srv.proc.pid, spares=True)) == 1)
        (spare,) = children(srv.proc.pid, spares=True)
        for kind in ("user", "pid", "mnt", "net"):
            assert namespace(spare, kind) != namespace(srv.proc.pid, kind), kind
        # While it builds that root it opens each path of its Landlock
        # rules for a moment: what it holds is read once it is done (a
        # descriptor it kept for good fails the wait).
        wait_until(lambda: only_its_own(held_by(spare)))
        held = held_by(spare)
        assert only_its_own(held), held
        sockets = [link for fd, link in held.items() if fd > 2 and link.startswith("socket:")]
        assert len(sockets) == 1, held
        unload(srv)
        mark = srv.log_size()
        (second,) = load(srv)
        assert second == spare and taken(srv, mark) == [spare] and made(srv, mark) == [spare]
        assert first != second
        add_sub_works(srv)
        # A spare serves one stub: the next load is given a new one.
        wait_until(lambda: children(srv.proc.pid, spares=True) not in ([], [spare]))
        (following,) = children(srv.proc.pid, spares=True)
        unload(srv)
        mark = srv.log_size()
        (third,) = load(srv)
        assert third == following != spare and taken(srv, mark) == [following]
        add_sub_works(srv)


def test_a_spare_not_taken_is_reaped_when_its_template_ends(tmp_path: Path) -> None:
    repo = build_repository(tmp_path / "repo", MODELS)
    with running(TritonServer(repo, tmp_path, args=VERBOSE)) as srv:
        load(srv)
        wait_until(lambda: len(children(srv.proc.pid, spares=True)) == 1)
        (spare,) = children(srv.proc.pid, spares=True)
        (template,) = children(srv.proc.pid, templates=True)
        unload(srv)
        os.kill(template, signal.SIGKILL)
        wait_until(lambda: not alive(template))  # a zombie of the server's
        # The next fork finds the template dead, ends it with its spare
        # (which no zombie of the server's may outlive) and starts another.
        mark = srv.log_size()
        (stub,) = load(srv)
        assert stub != spare and taken(srv, mark) == []
        assert srv.wait_log("starting it again", after=mark)
        assert not os.path.exists(f"/proc/{spare}"), "the spare was not reaped"
        add_sub_works(srv)
        wait_until(lambda: len(children(srv.proc.pid, spares=True)) == 1)
        (last,) = children(srv.proc.pid, spares=True)
    # At shutdown: the backend learned of it from the template's answer,
    # due then, and reaped it before the server exited.
    assert f"made a spare, pid {last}" in srv.log()
    assert not os.path.exists(f"/proc/{last}")


def test_a_spare_builds_the_common_root_ahead_and_its_stub_binds_its_own(tmp_path: Path) -> None:
    """Before it is taken, a spare has its ids mapped (by its template) and
    the part of a stub's root every stub has built: a tmpfs root with its
    /tmp, /dev/shm and the system in it, the host's root beneath it. The
    stub it becomes binds its own model's directory, gets its model's own
    scratch size, and sees nothing else of the host."""
    repo = build_repository(tmp_path / "repo", ["add_sub", "sandbox_probe"])
    with_parameters(repo, "sandbox_probe", stub_sandbox_tmp_bytes=str(4 << 20))
    with running(TritonServer(repo, tmp_path, args=VERBOSE)) as srv:
        load(srv)
        wait_until(lambda: len(children(srv.proc.pid, spares=True)) == 1)
        (spare,) = children(srv.proc.pid, spares=True)
        with open(f"/proc/{spare}/uid_map") as f:
            assert f.read().split()[:3] == ["0", "0", "1"]
        # The spare mounts them one by one: wait for the last of them, not
        # for one that may come before the others.
        common = {"/", "/tmp", "/dev/shm", "/usr", "/.tritonpy-host"}
        wait_until(lambda: common <= mounts(spare).keys())
        seen = mounts(spare)
        assert seen["/"] == seen["/tmp"] == seen["/dev/shm"] == "tmpfs", seen
        assert "/usr" in seen and "/.tritonpy-host" in seen, seen
        assert str(repo) not in seen  # no model's directory before its request
        mark = srv.log_size()
        code, body = srv.request("POST", "/v2/repository/models/sandbox_probe/load", b"")
        assert code == 200, body
        assert taken(srv, mark) == [spare]
        # The ruleset it built ahead is applied and closed before model code.
        held = [os.readlink(f"/proc/{spare}/fd/{fd}") for fd in os.listdir(f"/proc/{spare}/fd")]
        assert "anon_inode:[landlock-ruleset]" not in held, held
        filled = probe(srv, "fill", "/tmp")
        assert filled["error"].startswith("ENOSPC"), filled
        assert filled["written"] <= 4 << 20, filled
        own = repo / "sandbox_probe" / "config.pbtxt"
        assert probe(srv, "read", str(own)).get("ok", 0) > 0
        for absent in ("/etc/shadow", str(repo / "add_sub" / "config.pbtxt"), "/.tritonpy-host"):
            assert probe(srv, "list" if absent.endswith("host") else "read", absent)[
                "error"
            ].startswith("ENOENT"), absent
        add_sub_works(srv)
