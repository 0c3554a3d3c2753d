# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Execution environments (model parameter EXECUTION_ENV_PATH) through a real
tritonserver: a directory and a tar.gz environment run the stub on their own
interpreter; an archive is unpacked once into a private cache and reused;
hostile archives fail the load naming the member and write nothing outside
the cache; so do archives past the unpacking limits (bytes, members,
compression ratio); the unpacked tree is read-only and a changed one is
unpacked again; a link planted where the temporary cache goes is refused;
missing or broken environments fail with a clear message; the official
verbose line announces an archive once per modification time.

The environments are virtual environments made here (no network): the
directory one sees this installation's site-packages through a .pth file
(tritonpy included), the archived one only numpy, so the backend lends it
its tritonpy."""

from __future__ import annotations

import io
import os
import re
import stat
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import tritonpy

from checks import infer_json, infer_text, same_path
from environments import (
    IN_MODEL_DIR,
    LNK,
    REG,
    SITE,
    SYM,
    Member,
    env_server,
    make_venv,
    numpy_only,
    pack,
    write_model,
)
from server import MODELS, TritonServer, children, eventually, running

HOSTILE_ENV = MODELS / "hostile_env"


def zeros_archive(archive: Path, size: int) -> Path:
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("share/zeros")
        info.size = size
        tar.addfile(info, io.BytesIO(bytes(size)))
    return archive


# Hostile archives: their members after one harmless file, the member the
# load error must name, and why. Attack targets sit in {outside} (<work>/
# outside); archives are unpacked in <work>/cache/.<key>.tmp-*/, so "../../"
# from there is <work>.
HOSTILE: dict[str, tuple[list[Member], str, str]] = {
    "absolute": ([("{outside}/abs.txt", REG, "")], "{outside}/abs.txt", "absolute path"),
    "dotdot": (
        [("lib/../../../outside/dotdot.txt", REG, "")],
        "lib/../../../outside/dotdot.txt",
        "'..' in its path",
    ),
    "symlink_absolute": (
        [("escape", SYM, "{outside}"), ("escape/sym.txt", REG, "")],
        "escape",
        "symbolic link to the absolute path",
    ),
    "symlink_relative": (
        [("lib/escape", SYM, "../../../outside"), ("lib/escape/sym.txt", REG, "")],
        "lib/escape",
        "symbolic link leading outside the environment",
    ),
    # Each link is harmless while checked; together `a` leads to the parent
    # of the environment: caught by the check of all links at the end.
    "symlink_swap": ([("a", SYM, "b/.."), ("b", SYM, ".")], "a", "symbolic link leading outside"),
    # The second member would write through the hard link into the victim.
    "hardlink_absolute": (
        [("hl", LNK, "{outside}/victim.txt"), ("hl", REG, "")],
        "hl",
        "hard link to '{outside}/victim.txt', outside the environment",
    ),
    "hardlink_relative": (
        [("hl", LNK, "../../outside/victim.txt"), ("hl", REG, "")],
        "hl",
        "hard link to '../../outside/victim.txt', outside the environment",
    ),
    "device": ([("dev/null", tarfile.CHRTYPE, "")], "dev/null", "device file"),
    "fifo": ([("pipe", tarfile.FIFOTYPE, "")], "pipe", "FIFO"),
}


class Envs:
    """The server and the environments of this module's tests."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.cache = work / "cache"
        self.outside = work / "outside"
        self.outside.mkdir()
        self.victim = self.outside / "victim.txt"
        self.victim.write_bytes(b"original")
        self.venv_dir = make_venv(work / "dir-env", SITE, copies=False)
        tar_src = make_venv(work / "tar-env", numpy_only(work / "numpy-only"), copies=True)
        self.archive = pack(tar_src, work / "archives" / "env.tar.gz")
        self.archive_par = pack(
            tar_src,
            work / "archives" / "env-par.tar.gz",
            [("share/par.txt", REG, "")],
        )
        repo = work / "repo"
        repo.mkdir()
        write_model(repo, "env_dir", str(self.venv_dir))
        write_model(repo, "env_tar", IN_MODEL_DIR, {"env.tar.gz": self.archive})
        write_model(repo, "env_tar_copy", IN_MODEL_DIR, {"env.tar.gz": self.archive})
        for name in ("env_par_a", "env_par_b"):
            write_model(repo, name, IN_MODEL_DIR, {"env.tar.gz": self.archive_par})
        # One environment for a model that rewrites it and one that comes after.
        shared = pack(tar_src, work / "archives" / "env-shared.tar.gz", [("share/s.txt", REG, "")])
        files = {"env.tar.gz": shared}
        write_model(repo, "env_shared_hostile", IN_MODEL_DIR, files, source=HOSTILE_ENV)
        write_model(repo, "env_shared_victim", IN_MODEL_DIR, files)
        for kind, (members, _, _) in HOSTILE.items():
            placed = [(self.place(n), t, self.place(link)) for n, t, link in members]
            archive = work / "archives" / f"{kind}.tar.gz"
            pack(None, archive, [("bin/README", REG, ""), *placed])
            write_model(repo, f"evil_{kind}", IN_MODEL_DIR, {"env.tar.gz": archive})
        (work / "empty-env").mkdir()
        corrupt = work / "archives" / "corrupt.tar.gz"
        corrupt.write_bytes(os.urandom(4096))
        write_model(repo, "env_escapes", "$$TRITON_MODEL_DIRECTORY/../env_tar/env.tar.gz")
        write_model(repo, "env_missing", str(work / "no-such-env.tar.gz"))
        write_model(repo, "env_relative", "env.tar.gz")
        write_model(repo, "env_no_python", str(work / "empty-env"))
        write_model(repo, "env_corrupt", IN_MODEL_DIR, {"env.tar.gz": corrupt})
        # 70 MiB of zeros, gzip-compressed a thousandfold.
        bomb = zeros_archive(work / "archives" / "bomb.tar.gz", 70 << 20)
        write_model(repo, "env_bomb", IN_MODEL_DIR, {"env.tar.gz": bomb})
        self.server = env_server(repo, work, self.cache)

    def place(self, text: str) -> str:
        return text.format(outside=self.outside)

    def client(self) -> httpclient.InferenceServerClient:
        return httpclient.InferenceServerClient(self.server.http_url, network_timeout=120)

    def load(self, name: str) -> None:
        self._control("load_model", name)

    def unload(self, name: str) -> None:
        self._control("unload_model", name)

    def _control(self, action: str, name: str) -> None:
        c = self.client()
        try:
            getattr(c, action)(name)
        finally:
            c.close()

    def load_error(self, name: str) -> str:
        with pytest.raises(InferenceServerException) as e:
            self.load(name)
        assert not self.server.model_ready(name)
        return str(e.value)

    def info(self, name: str) -> dict[str, Any]:
        return infer_json(self.server, name, "IN", np.array([1], np.int32), "INT32", "INFO")

    def unpacked(self) -> list[Path]:
        return sorted(p for p in self.cache.iterdir() if p.is_dir() and len(p.name) == 32)


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envs]:
    e = Envs(tmp_path_factory.mktemp("execenv"))
    with running(e.server):
        yield e


# ------------------------------------------------------------------- tests


def test_directory_env_runs_the_stub_on_its_interpreter(envs: Envs) -> None:
    envs.load("env_dir")
    info = envs.info("env_dir")
    assert same_path(info["prefix"], envs.venv_dir), info
    assert same_path(os.path.dirname(info["executable"]), envs.venv_dir / "bin"), info
    # The environment has tritonpy itself (through its .pth): nothing lent.
    assert same_path(info["tritonpy"], tritonpy.__file__), info
    line = next(x for x in envs.server.log().splitlines() if "model 'env_dir': stubs run on" in x)
    assert "lent" not in line and "unpacked" not in line, line


def test_the_template_of_an_environment_ends_with_its_last_model(envs: Envs) -> None:
    # Its stubs fork from a template on its interpreter, which no other
    # model uses: it runs while the model is loaded.
    envs.unload("env_dir")
    at = envs.server.log_size()
    envs.load("env_dir")
    envs.info("env_dir")
    log = envs.server.log()[at:]
    python = re.search(r"model 'env_dir': stubs run on (\S+)", log)
    assert python, log
    started = re.search(
        rf"stub template \(interpreter '{re.escape(python[1])}'[^)]*\) started, pid (\d+)", log
    )
    assert started, log
    pid = int(started[1])
    assert pid in children(envs.server.proc.pid, templates=True)
    envs.unload("env_dir")
    ended = f"pid {pid} ended: no loaded model forks from it"
    assert envs.server.wait_log(ended, timeout=60, after=at), envs.server.log()[at:]
    assert pid not in children(envs.server.proc.pid, templates=True)


def test_archive_env_is_unpacked_into_the_private_cache(envs: Envs) -> None:
    envs.load("env_tar")
    info = envs.info("env_tar")
    prefix = Path(info["prefix"])
    assert same_path(prefix.parent, envs.cache), info
    assert same_path(info["executable"], prefix / "bin" / "python3"), info
    assert info["version"] == list(sys.version_info[:2])
    # The environment has numpy but no tritonpy: the backend lent its own.
    assert same_path(info["tritonpy"], tritonpy.__file__), info
    assert same_path(info["numpy"], np.__file__), info
    assert stat.S_IMODE(envs.cache.stat().st_mode) == 0o700
    # Read-only, all of it (links have no mode of their own).
    for dirpath, dirnames, filenames in os.walk(prefix):
        for path in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            st = os.lstat(path)
            assert stat.S_ISLNK(st.st_mode) or st.st_mode & 0o222 == 0, (path, oct(st.st_mode))
    assert (envs.cache / f"{prefix.name}.manifest").is_file()
    log = envs.server.log()
    assert "model 'env_tar': stubs run on" in log and "unpacked from" in log, log[-2000:]
    assert "tritonpy lent to it by" in log


def test_unpacked_env_is_reused_on_reload_and_by_other_models(envs: Envs) -> None:
    envs.load("env_tar")
    prefix = Path(envs.info("env_tar")["prefix"])
    inode = prefix.stat().st_ino
    envs.unload("env_tar")
    envs.load("env_tar")
    again = Path(envs.info("env_tar")["prefix"])
    assert again == prefix and again.stat().st_ino == inode
    assert "(reused)" in envs.server.log()
    # The same bytes under another model: the same unpacked tree.
    envs.load("env_tar_copy")
    assert Path(envs.info("env_tar_copy")["prefix"]) == prefix


def test_concurrent_loads_of_one_archive_unpack_it_once(envs: Envs) -> None:
    before = set(envs.unpacked())
    errors: list[BaseException] = []

    def load(name: str) -> None:
        try:
            envs.load(name)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=load, args=(n,)) for n in ("env_par_a", "env_par_b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    a, b = (Path(envs.info(n)["prefix"]) for n in ("env_par_a", "env_par_b"))
    assert a == b and (a / "share" / "par.txt").is_file()
    assert set(envs.unpacked()) - before == {a}
    assert not list(envs.cache.glob(".*.tmp-*"))


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_archive_fails_the_load_naming_the_member(envs: Envs, kind: str) -> None:
    _, member, reason = HOSTILE[kind]
    model = f"evil_{kind}"
    msg = envs.load_error(model)
    assert f"tritonpy: model '{model}': EXECUTION_ENV_PATH" in msg, msg
    assert f"archive member '{envs.place(member)}': {envs.place(reason)}" in msg, msg
    # Nothing written outside the cache, no half-unpacked tree left in it.
    assert sorted(p.name for p in envs.outside.iterdir()) == ["victim.txt"]
    assert envs.victim.read_bytes() == b"original"
    assert not list(envs.work.glob("*.txt")) and not list(envs.cache.glob("*.txt"))
    assert not list(envs.cache.glob(".*.tmp-*"))


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        ("env_escapes", "is outside the model directory"),
        ("env_missing", "no-such-env.tar.gz does not exist"),
        ("env_relative", "must be an absolute path or start with $$TRITON_MODEL_DIRECTORY"),
        ("env_no_python", "has no bin/python3 or bin/python"),
        ("env_corrupt", "is not a readable tar archive"),
    ],
)
def test_missing_or_broken_env_fails_the_load_clearly(envs: Envs, model: str, needle: str) -> None:
    msg = envs.load_error(model)
    assert f"tritonpy: model '{model}': EXECUTION_ENV_PATH" in msg and needle in msg, msg


def test_a_changed_unpacked_env_is_unpacked_again(envs: Envs) -> None:
    envs.load("env_tar")
    prefix = Path(envs.info("env_tar")["prefix"])
    # What a model (any, running as the server's user) could do to a tree
    # another model runs from.
    prefix.chmod(0o755)
    (prefix / "sitecustomize.py").write_text("raise SystemExit('tampered')\n")
    envs.unload("env_tar")
    envs.load("env_tar")
    assert Path(envs.info("env_tar")["prefix"]) == prefix
    assert not (prefix / "sitecustomize.py").exists()
    assert stat.S_IMODE(prefix.stat().st_mode) & 0o222 == 0
    assert envs.server.wait_log(
        f"model 'env_tar': the unpacked environment {prefix} was changed since it was "
        "unpacked ('sitecustomize.py' was added): unpacked again from"
    ), envs.server.log()[-3000:]
    assert not list(envs.cache.glob(".*.changed-*"))


def test_a_compression_bomb_fails_the_load_naming_the_limit(envs: Envs) -> None:
    envs.load("env_dir")
    msg = envs.load_error("env_bomb")
    assert "tritonpy: model 'env_bomb': EXECUTION_ENV_PATH" in msg, msg
    assert "times its size (env-unpack-max-ratio=100): a compression bomb?" in msg, msg
    assert not list(envs.cache.glob(".*.tmp-*"))
    # The server and another model serve on.
    assert envs.server.model_ready("env_dir") and same_path(
        envs.info("env_dir")["prefix"], envs.venv_dir
    )


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TritonServer, Path]]:
    """A server whose unpacking limits are set low by the backend keys."""
    work = tmp_path_factory.mktemp("tight")
    repo = work / "repo"
    repo.mkdir()
    archives = work / "archives"
    archives.mkdir()
    # 2 MiB of zeros: far below the default ratio's floor, over 1 MiB.
    write_model(
        repo,
        "env_big",
        IN_MODEL_DIR,
        {"env.tar.gz": zeros_archive(archives / "big.tar.gz", 2 << 20)},
    )
    many = pack(None, archives / "many.tar.gz", [(f"share/f{i}", REG, "") for i in range(80)])
    write_model(repo, "env_many", IN_MODEL_DIR, {"env.tar.gz": many})
    server = env_server(
        repo,
        work,
        work / "cache",
        "--backend-config=tritonpy,env-unpack-max-bytes=1048576",
        "--backend-config=tritonpy,env-unpack-max-members=64",
    )
    with running(server):
        yield server, work


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        ("env_big", "unpacks to more than 1048576 bytes (env-unpack-max-bytes=1048576)"),
        ("env_many", "has more than 64 members (env-unpack-max-members=64)"),
    ],
)
def test_unpacking_limits_are_backend_settings(
    tight: tuple[TritonServer, Path], model: str, needle: str
) -> None:
    server, work = tight
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    try:
        with pytest.raises(InferenceServerException) as e:
            c.load_model(model)
    finally:
        c.close()
    msg = str(e.value)
    assert f"tritonpy: model '{model}': EXECUTION_ENV_PATH" in msg and needle in msg, msg
    assert not server.model_ready(model)
    assert [p.name for p in (work / "cache").iterdir() if len(p.name) == 32] == []
    assert "env-unpack-max-bytes=1048576 env-unpack-max-members=64" in server.log()


def test_a_link_planted_where_the_temporary_cache_goes_is_refused(
    tmp_path: Path, envs: Envs
) -> None:
    # No writable cache home, so the cache falls back to tritonpy-envs-<uid>
    # in TMPDIR, where a link to somewhere else was planted beforehand.
    home_file = tmp_path / "not-a-directory"
    home_file.write_text("")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    lured = tmp_path / "lured"
    lured.mkdir()
    (tmp / f"tritonpy-envs-{os.getuid()}").symlink_to(lured)
    repo = tmp_path / "repo"
    repo.mkdir()
    write_model(repo, "env_tar", IN_MODEL_DIR, {"env.tar.gz": envs.archive})
    server = TritonServer(
        repo,
        tmp_path,
        args=["--model-control-mode=explicit"],
        prefix=["env", f"XDG_CACHE_HOME={home_file}", f"TMPDIR={tmp}"],
    )
    with running(server):
        c = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
        try:
            with pytest.raises(InferenceServerException) as e:
                c.load_model("env_tar")
            msg = str(e.value)
            assert "tritonpy: model 'env_tar': EXECUTION_ENV_PATH" in msg, msg
            assert f"tritonpy-envs-{os.getuid()} is a symbolic link (to '{lured}')" in msg, msg
            assert list(lured.iterdir()) == []
            # Once the link is gone the cache is made there, a real directory.
            (tmp / f"tritonpy-envs-{os.getuid()}").unlink()
            c.load_model("env_tar")
        finally:
            c.close()
        info = infer_json(server, "env_tar", "IN", np.array([1], np.int32), "INT32", "INFO")
        assert same_path(Path(info["prefix"]).parent, tmp / f"tritonpy-envs-{os.getuid()}"), info


def test_a_model_rewriting_its_shared_env_does_not_reach_the_next_model(envs: Envs) -> None:
    envs.load("env_shared_hostile")
    out = infer_text(envs.server, "env_shared_hostile")
    planted = Path(out)
    assert planted.is_file(), out  # the stub could write there (as root, or chmod)
    prefix = next(p for p in planted.parents if p.parent == envs.cache)
    rel = planted.relative_to(prefix)
    # Another model of the same archive gets it as it was unpacked: loads,
    # and its stubs start (the planted sitecustomize.py would end them).
    envs.load("env_shared_victim")
    assert Path(envs.info("env_shared_victim")["prefix"]) == prefix
    assert not planted.exists()
    assert envs.server.wait_log(
        f"model 'env_shared_victim': the unpacked environment {prefix} was changed since it "
        f"was unpacked ('{rel}' was added): unpacked again from"
    ), envs.server.log()[-3000:]
    # The server and the model that did it serve on.
    assert envs.server.model_ready("env_shared_hostile")
    assert infer_text(envs.server, "env_shared_hostile") == out


def test_extraction_is_logged_as_upstream_once_per_archive_modification(
    tmp_path: Path, envs: Envs
) -> None:
    # The official backend's verbose line, which Triton's QA counts: on the
    # first load of an archive and after the archive is touched, not on a
    # reload that changed only model.py. The repository is reached through
    # a symbolic link: the line names the archive's real path.
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "repo-link").symlink_to(repo)
    model = write_model(repo, "env_tar", IN_MODEL_DIR, {"env.tar.gz": envs.archive})
    archive = os.path.realpath(model / "env.tar.gz")
    server = env_server(tmp_path / "repo-link", tmp_path, tmp_path / "cache", "--log-verbose=1")

    def touch(path: Path) -> None:  # a later modification time, whole seconds later
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10 * 10**9))

    with running(server):
        c = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
        try:
            c.load_model("env_tar")
            touch(model / "1" / "model.py")
            c.load_model("env_tar")
            touch(model / "env.tar.gz")
            c.load_model("env_tar")
        finally:
            c.close()

        # Each load logs its INFO line after the extraction line, if any.
        def loaded_thrice() -> None:
            assert server.log().count("model 'env_tar': stubs run on") == 3, server.log()[-3000:]

        eventually(loaded_thrice)
        log = server.log()
    lines = [x for x in log.splitlines() if "Extracting Python execution env" in x]
    assert len(lines) == 2, lines
    (root,) = (p for p in (tmp_path / "cache").iterdir() if p.is_dir() and len(p.name) == 32)
    official = f"Extracting Python execution env {archive} (tritonpy: "
    assert official + f"unpacked into {root} in " in lines[0], lines
    # Touched, not changed: tritonpy's cache still has its content.
    assert official + f"the same content was unpacked before into {root}: reused)" in lines[1]
    # A verbose line: the server of the other tests logs at level 0.
    if os.environ.get("TRITONPY_TEST_LOG_VERBOSE", "0") == "0":
        envs.load("env_tar")
        assert "Extracting Python execution env" not in envs.server.log()
