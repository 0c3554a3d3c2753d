# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""tritonpy.exec_env, the helper the backend runs for EXECUTION_ENV_PATH:
path resolution, the private cache, unpacking (what is kept, what is
refused, reuse, concurrency) and the interpreter decision. The same paths
through a real tritonserver: tests/integration/test_execution_env.py."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest

import tritonpy
from tritonpy import exec_env as env
from tritonpy.exec_env import cache as env_cache
from tritonpy.exec_env import extract as env_extract
from tritonpy.exec_env import probe as env_probe


def add(tar: tarfile.TarFile, name: str, data: bytes = b"", **attrs: Any) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in attrs.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if data else None)


def archive(path: Path, *members: tuple[str, bytes, dict[str, Any]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data, attrs in members:
            add(tar, name, data, **attrs)
    return path


FILE = {"mode": 0o644}
SYM = tarfile.SYMTYPE
LNK = tarfile.LNKTYPE


def reg(name: str, data: bytes = b"x") -> tuple[str, bytes, dict[str, Any]]:
    return (name, data, FILE)


def sym(name: str, target: str) -> tuple[str, bytes, dict[str, Any]]:
    return (name, b"", {"type": SYM, "linkname": target})


def lnk(name: str, target: str) -> tuple[str, bytes, dict[str, Any]]:
    return (name, b"", {"type": LNK, "linkname": target})


def good_archive(path: Path) -> Path:
    return archive(
        path,
        ("bin", b"", {"type": tarfile.DIRTYPE, "mode": 0o555}),
        ("bin/python3", b"#!/bin/sh\n", {"mode": 0o4755, "mtime": 1_000_000}),
        sym("bin/python", "python3"),
        reg("lib/python3/x.py", b"x = 1\n"),
        lnk("lib/python3/y.py", "lib/python3/x.py"),
        sym("share/up", "../lib/python3"),
        reg("share/up/z.py", b"z = 2\n"),  # through a link that stays inside
    )


# ------------------------------------------------------------------ paths


def test_model_directory_variable_is_the_model_directory(tmp_path: Path) -> None:
    model = str(tmp_path / "m")
    assert env.resolve_path("$$TRITON_MODEL_DIRECTORY/e.tar.gz", model) == tmp_path / "m/e.tar.gz"
    assert env.resolve_path("$$TRITON_MODEL_DIRECTORY/a/../e", model) == tmp_path / "m/e"
    assert env.resolve_path("/opt/envs/e.tar.gz", model) == Path("/opt/envs/e.tar.gz")


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("$$TRITON_MODEL_DIRECTORY/../other/e.tar.gz", "outside the model directory"),
        ("$$TRITON_MODEL_DIRECTORYx/e.tar.gz", "outside the model directory"),
        ("envs/e.tar.gz", "must be an absolute path"),
    ],
)
def test_paths_leaving_the_model_directory_or_relative_are_refused(
    tmp_path: Path, value: str, needle: str
) -> None:
    with pytest.raises(env.EnvError, match=needle):
        env.resolve_path(value, str(tmp_path / "m"))


def test_a_sandboxed_model_s_environment_lies_where_its_stubs_may_read(tmp_path: Path) -> None:
    model, opened, other = tmp_path / "m", tmp_path / "opened", tmp_path / "other"
    for d in (model / "env", opened / "env", other / "env"):
        d.mkdir(parents=True)
    (model / "out").symlink_to(other / "env")
    (model / "in").symlink_to(opened / "env")
    readable = [str(model), str(opened)]
    assert env.confine(model / "env", readable) == model / "env"
    assert env.confine(opened / "env", readable) == opened / "env"
    # A link counts where it leads.
    assert env.confine(model / "in", readable) == opened / "env"
    # Refused alike whether it is there or not, and where a link leads is
    # not said.
    for path in (other / "env", model / "out", tmp_path, other / "missing"):
        with pytest.raises(env.EnvError, match="not in what the model's sandboxed stubs") as e:
            env.confine(path, readable)
        assert str(other) not in str(e.value), e.value
    # prepare refuses it before it reads anything there.
    with pytest.raises(env.EnvError, match="not in what"):
        env.prepare(str(other / "env"), str(model), str(tmp_path / "cache"), readable=readable)


def test_cache_dir_is_private(tmp_path: Path) -> None:
    fresh = env_cache.prepare_cache_dir(tmp_path / "a" / "cache")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    os.chmod(wide, 0o777)
    env_cache.prepare_cache_dir(wide)
    assert stat.S_IMODE(wide.stat().st_mode) == 0o700


def test_cache_dir_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(env_cache.os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)
    with pytest.raises(env.EnvError, match="belongs to user id"):
        env_cache.prepare_cache_dir(tmp_path)


def test_default_cache_dir_follows_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert env_cache.default_cache_dir() == tmp_path / "xdg" / "tritonpy" / "envs"
    # No writable home: a per-user directory in the temporary directory.
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    assert env_cache.default_cache_dir().name == f"tritonpy-envs-{os.getuid()}"


# ------------------------------------------------------------- unpacking


def test_unpacking_keeps_modes_times_and_inner_links(tmp_path: Path) -> None:
    root, extracted, changed = env_cache.unpack(
        good_archive(tmp_path / "e.tar.gz"), tmp_path / "cache"
    )
    assert extracted and changed is None
    python = root / "bin" / "python3"
    assert stat.S_IMODE(python.stat().st_mode) == 0o555  # executable, set-uid and write dropped
    assert python.stat().st_mtime == 1_000_000
    assert stat.S_IMODE((root / "bin").stat().st_mode) == 0o555  # as archived: read-only
    assert os.readlink(root / "bin" / "python") == "python3"
    assert (root / "lib/python3/y.py").stat().st_ino == (root / "lib/python3/x.py").stat().st_ino
    assert (root / "lib/python3/z.py").read_text() == "z = 2\n"


def test_unpacked_trees_are_reused_by_content(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = good_archive(tmp_path / "e.tar.gz")
    root, _, _ = env_cache.unpack(first, cache)
    assert env_cache.unpack(first, cache) == (root, False, None)
    copy = tmp_path / "copy.tar.gz"
    copy.write_bytes(first.read_bytes())
    assert env_cache.unpack(copy, cache) == (root, False, None)
    # Changed bytes at the same path: unpacked anew.
    archive(first, reg("other.txt"))
    other, extracted, _ = env_cache.unpack(first, cache)
    assert extracted and other != root and (other / "other.txt").is_file()


def test_concurrent_unpacking_of_one_archive_happens_once(tmp_path: Path) -> None:
    source = good_archive(tmp_path / "e.tar.gz")
    results: list[tuple[Path, bool, str | None]] = []
    threads = [
        threading.Thread(target=lambda: results.append(env_cache.unpack(source, tmp_path / "c")))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r[0] for r in results}) == 1 and [r[1] for r in results].count(True) == 1
    assert not list((tmp_path / "c").glob(".*.tmp-*"))


def test_a_crash_while_unpacking_is_cleaned_up_by_the_next_unpacking(tmp_path: Path) -> None:
    source = good_archive(tmp_path / "e.tar.gz")
    cache = tmp_path / "cache"
    root, _, _ = env_cache.unpack(source, cache)
    # What a process killed while unpacking leaves: a staging directory
    # (here one made read-only just before the kill) and no tree.
    env_cache.remove_tree(root)
    stale = cache / f".{root.name}.tmp-killed"
    (stale / "bin").mkdir(parents=True)
    stale.chmod(0o500)
    assert env_cache.unpack(source, cache) == (root, True, None)
    assert not stale.exists() and (root / "bin" / "python3").is_file()


HOSTILE = {
    "absolute": ([reg("{tmp}/evil")], "{tmp}/evil", "absolute path"),
    "dotdot": ([reg("a/../../evil")], "a/../../evil", "'..' in its path"),
    "symlink_out": ([sym("l", "../..")], "l", "symbolic link leading outside"),
    "symlink_absolute": ([sym("l", "/tmp")], "l", "symbolic link to the absolute path"),
    # A link made harmless-looking first, then a write through it once a
    # second link changes what it leads to.
    "write_through_swapped_link": (
        [sym("a", "b/.."), sym("b", "."), reg("a/evil")],
        "a/evil",
        "its directory leads outside",
    ),
    "replace_link": ([sym("l", "x"), reg("l")], "l", "it replaces a symbolic link"),
    "hardlink_out": ([lnk("h", "../evil")], "h", "hard link to '../evil', outside the environment"),
    "hardlink_to_link": (
        [sym("l", "."), lnk("h", "l")],
        "h",
        "hard link to 'l', not a file unpacked",
    ),
    "device": ([("d", b"", {"type": tarfile.BLKTYPE})], "d", "device file"),
    "fifo": ([("f", b"", {"type": tarfile.FIFOTYPE})], "f", "FIFO"),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_members_are_refused_and_leave_nothing(tmp_path: Path, kind: str) -> None:
    members, name, reason = HOSTILE[kind]
    members = [(n.format(tmp=tmp_path), data, attrs) for n, data, attrs in members]
    name = name.format(tmp=tmp_path)
    source = archive(tmp_path / "e.tar.gz", reg("ok.txt"), *members)
    cache = tmp_path / "deep" / "cache"
    with pytest.raises(env.EnvError) as e:
        env_cache.unpack(source, cache)
    assert f"archive member {name!r}: {reason}" in str(e.value)
    # Only the digest memo and the lock file: no tree, no staging directory.
    assert [p.name for p in cache.iterdir() if p.name != "index" and p.suffix != ".lock"] == []
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["cache"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "e.tar.gz"]


def test_not_an_archive(tmp_path: Path) -> None:
    bad = tmp_path / "e.tar.gz"
    bad.write_bytes(b"\x1f\x8b" + os.urandom(100))
    with pytest.raises(env.EnvError, match="not a readable tar archive"):
        env_cache.unpack(bad, tmp_path / "cache")


def test_a_planted_link_where_the_temporary_cache_goes_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No writable home, so the cache falls back to the temporary directory,
    # where someone has put a link of that name to a directory of ours.
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    monkeypatch.setattr(env_cache.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    target = tmp_path / "lured"
    target.mkdir()
    planted = tmp_path / "tmp" / f"tritonpy-envs-{os.getuid()}"
    planted.symlink_to(target)
    source = good_archive(tmp_path / "e.tar.gz")
    with pytest.raises(
        env.EnvError, match=r"tritonpy-envs-\d+ is a symbolic link \(to '.*lured'\)"
    ):
        env.prepare(str(source), str(tmp_path), None)
    assert list(target.iterdir()) == []
    # A dangling link is refused the same way (it is not created through).
    planted.unlink()
    planted.symlink_to(tmp_path / "nowhere")
    with pytest.raises(env.EnvError, match="is a symbolic link"):
        env_cache.prepare_cache_dir(env_cache.default_cache_dir())
    assert not (tmp_path / "nowhere").exists()


# ---------------------------------------------------------------- limits


def zeros_archive(path: Path, size: int, mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        info = tarfile.TarInfo("share/zeros")
        info.size = size
        tar.addfile(info, io.BytesIO(bytes(size)))
    return path


@pytest.mark.parametrize(
    ("limits", "source", "needle"),
    [
        (
            env.Limits(max_bytes=1 << 20),
            lambda p: zeros_archive(p, 2 << 20),
            r"unpacks to more than 1048576 bytes \(env-unpack-max-bytes=1048576\)",
        ),
        # Plain tar: no compression, the same limit on the stream.
        (
            env.Limits(max_bytes=1 << 20),
            lambda p: zeros_archive(p, 2 << 20, "w"),
            r"\(env-unpack-max-bytes=1048576\)",
        ),
        (
            env.Limits(max_members=3),
            lambda p: archive(p, *(reg(f"f{i}") for i in range(4))),
            r"has more than 3 members \(env-unpack-max-members=3\)",
        ),
        (
            env.Limits(max_ratio=10, ratio_floor=1 << 20),
            lambda p: zeros_archive(p, 4 << 20),
            r"over 10 times its size \(env-unpack-max-ratio=10\): a compression bomb",
        ),
        # A long name is one header tarfile reads whole into memory.
        (
            env.Limits(max_header=4096),
            lambda p: archive(p, reg("x" * 8000)),
            r"a tar header of 8192 bytes",
        ),
        # Deeper than Python's recursion limit, one directory member at a
        # time (so that no single step recurses).
        (
            env.Limits(),
            lambda p: archive(
                p,
                *(
                    ("/".join(["d"] * i), b"", {"type": tarfile.DIRTYPE, "mode": 0o755})
                    for i in range(1, sys.getrecursionlimit() + 100)
                ),
            ),
            r"nested deeper than 200 directories",
        ),
    ],
    ids=["bytes", "bytes_plain", "members", "ratio", "header", "depth"],
)
def test_unpacking_stops_at_the_limits_and_leaves_nothing(
    tmp_path: Path, limits: env.Limits, source: Any, needle: str
) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(env.EnvError, match=needle):
        env_cache.unpack(source(tmp_path / "e.tar.gz"), cache, limits)
    assert [p.name for p in cache.iterdir() if p.name != "index" and p.suffix != ".lock"] == []


def test_the_limits_let_an_archive_within_them_through(tmp_path: Path) -> None:
    # Zeros compress a thousandfold, but below the ratio's floor they pass;
    # the limits are on the whole archive, each at its value.
    limits = env.Limits(
        max_bytes=(4 << 20) + 2048, max_members=2, max_ratio=10, ratio_floor=8 << 20
    )
    source = archive(tmp_path / "e.tar.gz", reg("a"), ("share/zeros", bytes(4 << 20), FILE))
    root, extracted, _ = env_cache.unpack(source, tmp_path / "cache", limits)
    assert extracted and (root / "share" / "zeros").stat().st_size == 4 << 20
    # A plain tar (no compression) unpacks the same.
    plain = zeros_archive(tmp_path / "p.tar", 1 << 20, "w")
    root, _, _ = env_cache.unpack(plain, tmp_path / "c3", limits)
    assert (root / "share" / "zeros").read_bytes() == bytes(1 << 20)
    # 0 turns each limit off.
    off = env.Limits(max_bytes=0, max_members=0, max_ratio=0)
    assert env_cache.unpack(zeros_archive(tmp_path / "z.tar.gz", 9 << 20), tmp_path / "c2", off)[1]


def _append_zero(source: Path, other: Path) -> None:
    with open(source, "ab") as f:
        f.write(b"\0")


def _rename_over(source: Path, other: Path) -> None:
    if other.exists():
        os.replace(other, source)


@pytest.mark.parametrize("change", [_append_zero, _rename_over], ids=["in_place", "renamed_over"])
def test_an_archive_changed_while_unpacked_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any
) -> None:
    # The digest names the bytes read first; bytes changed after it (in
    # place, or the path renamed over, which moves the first file's change
    # time too) would give the tree a name that is not its content's.
    source = good_archive(tmp_path / "e.tar.gz")
    other = archive(tmp_path / "other.tar.gz", reg("lib/python3/x.py", b"x = 'other'\n"))
    check = env_extract.check_member

    def change_then_check(member: tarfile.TarInfo, root: str) -> str:
        change(source, other)
        return check(member, root)

    cache = tmp_path / "cache"
    monkeypatch.setattr(env_extract, "check_member", change_then_check)
    with pytest.raises(
        env.EnvError, match="was changed while it was unpacked: load the model again"
    ):
        env_cache.unpack(source, cache)
    assert [p.name for p in cache.iterdir() if p.name != "index" and p.suffix != ".lock"] == []
    # Loaded again: the bytes there now, under their own digest.
    monkeypatch.undo()
    root, extracted, _ = env_cache.unpack(source, cache)
    assert extracted and root.name == hashlib.sha256(source.read_bytes()).hexdigest()[:32]


# ------------------------------------------------- the unpacked tree, checked


def test_the_unpacked_tree_is_read_only(tmp_path: Path) -> None:
    root, _, _ = env_cache.unpack(good_archive(tmp_path / "e.tar.gz"), tmp_path / "cache")
    for dirpath, dirnames, filenames in os.walk(root):
        for path in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            st = os.lstat(path)
            assert stat.S_ISLNK(st.st_mode) or st.st_mode & 0o222 == 0, (path, oct(st.st_mode))


def _write(path: Path, data: str) -> None:
    path.chmod(0o644)
    path.write_text(data)


def _replace_tree_by_link(root: Path) -> None:
    env_cache.remove_tree(root)
    lure = root.parent.parent / "lure"
    lure.mkdir()
    root.symlink_to(lure)


TAMPER = {
    "modified": (
        lambda r: _write(r / "lib/python3/x.py", "x = 2\n"),
        "'lib/python3/x.py' was modified",
    ),
    # The same bytes and times put back: the change time still tells.
    "restored": (
        lambda r: os.utime(r / "bin/python3", (2_000_000, 1_000_000)),
        "'bin/python3' was modified",
    ),
    "chmod": (lambda r: (r / "bin").chmod(0o755), "'bin' was modified"),
    "added": (
        lambda r: ((r / "share").chmod(0o755), (r / "share/sitecustomize.py").write_text("")),
        "'share/sitecustomize.py' was added",
    ),
    "removed": (
        lambda r: ((r / "lib/python3").chmod(0o755), (r / "lib/python3/y.py").unlink()),
        "'lib/python3/y.py' was removed",
    ),
    "replaced_by_link": (_replace_tree_by_link, "it is not a directory"),
    "no_manifest": (
        lambda r: (r.parent / f"{r.name}.manifest").unlink(),
        "it has no manifest",
    ),
}


@pytest.mark.parametrize("kind", list(TAMPER))
def test_a_changed_tree_is_unpacked_again(tmp_path: Path, kind: str) -> None:
    tamper, reason = TAMPER[kind]
    source = good_archive(tmp_path / "e.tar.gz")
    cache = tmp_path / "cache"
    root, _, _ = env_cache.unpack(source, cache)
    manifest = (cache / f"{root.name}.manifest").read_text()
    tamper(root)
    again, extracted, changed = env_cache.unpack(source, cache)
    assert again == root and extracted and changed is not None and reason in changed, changed
    assert not root.is_symlink() and (root / "lib/python3/x.py").read_text() == "x = 1\n"
    assert not (root / "share/sitecustomize.py").exists() and (root / "lib/python3/y.py").exists()
    assert env_cache.check_tree(root, cache / f"{root.name}.manifest") is None
    assert (cache / f"{root.name}.manifest").read_text() != manifest  # new inodes
    # Nothing of the changed tree is left, nor anything written through a link.
    assert (
        sorted(p.name for p in cache.iterdir() if p.name.startswith(".") and "lock" not in p.name)
        == []
    )
    assert not (tmp_path / "lure").exists() or list((tmp_path / "lure").iterdir()) == []
    # Intact now: reused as it is.
    assert env_cache.unpack(source, cache) == (root, False, None)


# ----------------------------------------------------------- interpreter


def fake_env(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    python = root / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    return root


def test_an_environment_with_tritonpy_runs_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = {"version": [3, 9], "modules": {"tritonpy.stub": True, "numpy": True}}
    monkeypatch.setattr(env_probe, "probe", lambda python, activate=None: info)
    root = fake_env(tmp_path / "e")
    result = env_probe.stub_environment(root, tmp_path / "cache")
    assert result["python"] == str(root / "bin" / "python") and not result["lent"]
    assert result["set"]["PATH"].startswith(f"{root}/bin:")
    assert result["set"]["PYTHONNOUSERSITE"] == "1"
    assert sorted(result["unset"]) == ["PYTHONHOME", "PYTHONPATH"]
    assert "PYTHONDONTWRITEBYTECODE" not in result["set"]
    # An unpacked (read-only, checked) tree: Python writes no bytecode into it.
    unpacked = env_probe.stub_environment(root, tmp_path / "cache", unpacked=True)
    assert unpacked["set"]["PYTHONDONTWRITEBYTECODE"] == "1"


def test_tritonpy_is_lent_to_the_same_python_minor_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = list(sys.version_info[:2])
    info = {"version": ours, "modules": {"tritonpy.stub": False, "numpy": True, "uvloop": False}}
    monkeypatch.setattr(env_probe, "probe", lambda python, activate=None: info)
    result = env_probe.stub_environment(fake_env(tmp_path / "e"), tmp_path / "cache")
    lent = Path(result["set"]["PYTHONPATH"])
    assert result["lent"] and sorted(p.name for p in lent.iterdir()) == ["tritonpy", "uvloop"]
    assert (lent / "tritonpy").resolve() == Path(tritonpy.__file__).resolve().parent
    assert result["unset"] == ["PYTHONHOME"]
    # Read-only, and remade when changed: a model's code that points the
    # link at its own package does not reach the next model it is lent to.
    assert stat.S_IMODE(lent.stat().st_mode) == 0o500
    lent.chmod(0o700)
    (lent / "tritonpy").unlink()
    (lent / "tritonpy").symlink_to(tmp_path)
    again = env_probe.stub_environment(fake_env(tmp_path / "e2"), tmp_path / "cache")
    assert Path(again["set"]["PYTHONPATH"]) == lent
    assert (lent / "tritonpy").resolve() == Path(tritonpy.__file__).resolve().parent
    assert [p.name for p in lent.parent.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("version", "numpy", "needle"),
    [
        ([3, 6], True, "its Python is 3.6 and has no tritonpy"),
        (list(sys.version_info[:2]), False, "it has no numpy"),
    ],
)
def test_an_environment_that_cannot_run_tritonpy_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: list[int], numpy: bool, needle: str
) -> None:
    info = {"version": version, "modules": {"tritonpy.stub": False, "numpy": numpy}}
    monkeypatch.setattr(env_probe, "probe", lambda python, activate=None: info)
    with pytest.raises(env.EnvError, match=needle):
        env_probe.stub_environment(fake_env(tmp_path / "e"), tmp_path / "cache")


def test_an_environment_without_an_interpreter_is_refused(tmp_path: Path) -> None:
    with pytest.raises(env.EnvError, match="has no bin/python3 or bin/python"):
        env_probe.find_interpreter(tmp_path)


def test_probe_asks_the_real_interpreter() -> None:
    info = env_probe.probe(Path(sys.executable))
    assert info["version"] == list(sys.version_info[:2])
    assert info["modules"] == {"tritonpy.stub": True, "numpy": True, "uvloop": True}


# ------------------------------------------------------------ activation


def activated_env(root: Path, script: str) -> Path:
    """An environment whose interpreter is this one and whose bin/activate
    is ``script``."""
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "bin" / "python3").symlink_to(sys.executable)
    (root / "bin" / "activate").write_text(script)
    return root


def test_activation_changes_are_what_activation_did() -> None:
    before = {"KEEP": "1", "CHANGE": "a", "GONE": "x", "SHLVL": "1", "_": "/bin/sh"}
    after = {"KEEP": "1", "CHANGE": "b", "NEW": "n", "SHLVL": "2", "_": "/usr/bin/python3"}
    assert env_probe.activation_changes(before, after) == ({"CHANGE": "b", "NEW": "n"}, ["GONE"])


def test_the_probe_runs_after_the_activation_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITONPY_TEST_GONE", "1")
    root = activated_env(
        tmp_path / "e",
        'echo "activation talks on stdout"\n'
        'export TRITONPY_TEST_ARGS="$#:$1"\n'
        "unset TRITONPY_TEST_GONE\n",
    )
    info = env_probe.probe(root / "bin" / "python3", root / "bin" / "activate")
    assert info["version"] == list(sys.version_info[:2])
    # Sourced without the probe's own arguments, its output kept off the answer.
    assert info["environ"]["TRITONPY_TEST_ARGS"] == "0:"
    assert "TRITONPY_TEST_GONE" not in info["environ"]


def test_an_activation_script_that_fails_is_refused(tmp_path: Path) -> None:
    root = activated_env(tmp_path / "e", "echo 'no such compiler' >&2\nreturn 3\n")
    activate = root / "bin" / "activate"
    with pytest.raises(env.EnvError) as e:
        env_probe.probe(root / "bin" / "python3", activate)
    assert f"(after sourcing {activate}) does not run (exit status 3)" in str(e.value)
    assert f"no such compiler\ntritonpy: sourcing {activate} failed with exit status 3" in str(
        e.value
    )


def test_stubs_get_what_activation_made_and_the_environment_s_lib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITONPY_TEST_GONE", "1")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/server/libs")
    root = activated_env(
        tmp_path / "e",
        'export CONDA_PREFIX="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"\n'
        'export PATH="$CONDA_PREFIX/bin:$PATH"\n'
        "unset TRITONPY_TEST_GONE\n",
    )
    real = env_probe.probe

    def with_tritonpy(python: Path, activate: Path | None = None) -> dict[str, Any]:
        info = real(python, activate)  # the real interpreter, after the real script
        info["modules"] = {"tritonpy.stub": True, "numpy": True, "uvloop": True}
        return info

    monkeypatch.setattr(env_probe, "probe", with_tritonpy)
    result = env_probe.stub_environment(root, tmp_path / "cache")
    assert result["activated"] and not result["lent"]
    assert result["set"]["CONDA_PREFIX"] == str(root)
    assert result["set"]["PATH"].startswith(f"{root}/bin:")
    assert result["set"]["LD_LIBRARY_PATH"] == f"{root}/lib:/server/libs"
    assert result["set"][env_probe.LIB_MARK] == f"{root}/lib"
    assert "TRITONPY_TEST_GONE" in result["unset"] and "PYTHONHOME" in result["unset"]
    assert not {"_", "SHLVL", "PWD", "OLDPWD"} & set(result["set"])


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("/env/lib:/server/libs", "/server/libs"),
        ("/env/lib", None),  # the server had none
        ("/other:/env/lib", "/other:/env/lib"),  # not the entry the backend put first
    ],
)
def test_the_stub_takes_the_environment_s_lib_off_the_library_path(
    monkeypatch: pytest.MonkeyPatch, before: str, after: str | None
) -> None:
    from tritonpy.stub import main as stub_main

    monkeypatch.setenv("LD_LIBRARY_PATH", before)
    monkeypatch.setenv(env_probe.LIB_MARK, "/env/lib")
    stub_main._restore_library_path()
    assert os.environ.get("LD_LIBRARY_PATH") == after
    assert env_probe.LIB_MARK not in os.environ
