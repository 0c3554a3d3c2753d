# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Archive members are contained exactly, on every Python tritonpy runs on:
the long-path trick of CVE-2025-4517 defeats os.path.realpath, and the
tarfile filter of Python 3.11.7."""

from __future__ import annotations

import io
import stat
import tarfile
from pathlib import Path

import pytest

from tritonpy import exec_env as env
from tritonpy.exec_env import extract as env_extract

STEPS = "abcdefghijklmnop"


def _add(tar: tarfile.TarFile, name: str, kind: bytes, link: str = "", data: bytes = b"") -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o777 if kind == tarfile.LNKTYPE else 0o755
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if data else None)


def long_path_trick(path: Path, dest: Path, escape: list[tuple[str, bytes, str]]) -> Path:
    """An archive whose links lead out of ``dest`` once followed, while
    os.path.realpath, which stops resolving at a path longer than PATH_MAX,
    sees them inside: 16 short links, each to a directory of a long name,
    nest 16 long names deep; a link at the end of the short path goes back
    up 16 levels (to the root), and "escape" goes through it and one level
    more. ``escape`` members (name, type, link) follow."""
    # Deep enough that the real path of the last link's directory plus the
    # link's own name passes PATH_MAX, while each directory still fits.
    long = (4095 - len(str(dest))) // len(STEPS) - 1
    comp = "d" * min(long, 255)
    last = "l" * 254
    with tarfile.open(path, "w") as tar:
        here = ""
        for step in STEPS:
            _add(tar, here + comp, tarfile.DIRTYPE)
            _add(tar, here + step, tarfile.SYMTYPE, comp)
            here += comp + "/"
        short = "/".join(STEPS)
        _add(tar, f"{short}/{last}", tarfile.SYMTYPE, "../" * len(STEPS))
        _add(tar, "escape", tarfile.SYMTYPE, f"{short}/{last}/../outside")
        for name, kind, link in escape:
            _add(tar, name, kind, link, b"evil\n" if kind == tarfile.REGTYPE else b"")
    return path


def test_the_long_path_trick_is_refused_naming_the_member(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    source = long_path_trick(tmp_path / "e.tar", dest, [("escape/evil", tarfile.REGTYPE, "")])
    with pytest.raises(env.EnvError) as e:
        env_extract.extract(source, dest)
    assert f"archive member '{'/'.join(STEPS)}/{'l' * 254}': " in str(e.value), e.value
    assert "PATH_MAX" in str(e.value)
    assert list(outside.iterdir()) == []


def test_a_hard_link_out_through_the_trick_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_text("server's\n")
    secret.chmod(0o400)
    dest = tmp_path / "dest"
    dest.mkdir()
    source = long_path_trick(tmp_path / "e.tar", dest, [("h", tarfile.LNKTYPE, "escape/secret")])
    with pytest.raises(env.EnvError, match=r"archive member '[a-p/]+/l{254}': "):
        env_extract.extract(source, dest)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o400
    assert secret.stat().st_nlink == 1


def test_a_hard_link_through_a_link_leading_out_is_refused(tmp_path: Path) -> None:
    """What an earlier member left on disk is followed exactly: a hard link
    through a link that leads out names the hard link."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("")
    root = tmp_path / "dest"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "up").symlink_to("../../outside")
    member = tarfile.TarInfo("h")
    member.type = tarfile.LNKTYPE
    member.linkname = "lib/up/secret"
    with pytest.raises(
        env.EnvError,
        match=r"archive member 'h': hard link to 'lib/up/secret', outside the environment: "
        r"it leads above the environment's root",
    ):
        env_extract.check_member(member, str(root))


def test_links_that_stay_inside_are_followed(tmp_path: Path) -> None:
    root = tmp_path / "dest"
    (root / "lib" / "real").mkdir(parents=True)
    (root / "lib" / "real" / "f").write_text("")
    (root / "lib64").symlink_to("lib")
    (root / "lib" / "cur").symlink_to("./real/../real")
    for name, kind, link in [
        ("lib64/cur/g", tarfile.REGTYPE, ""),
        ("h", tarfile.LNKTYPE, "lib64/cur/f"),
        ("s", tarfile.SYMTYPE, "lib64/cur/../../lib"),
    ]:
        member = tarfile.TarInfo(name)
        member.type = kind
        member.linkname = link
        assert env_extract.check_member(member, str(root)) == str(root / name)
