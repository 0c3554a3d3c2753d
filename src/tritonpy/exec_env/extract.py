# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Safe extraction of an environment archive: every member is checked
before it is written (absolute paths, ``..``, links leading out, devices,
FIFOs are refused, naming the member), and unpacking stops at ``Limits`` on
the bytes unpacked, the member count and the compression ratio."""

from __future__ import annotations

import bz2
import contextlib
import errno
import gzip
import io
import lzma
import os
import stat
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, cast


class EnvError(Exception):
    """A problem with the environment that fails the model's load."""


@dataclass(frozen=True)
class Limits:
    """What unpacking one archive may cost; 0 turns a limit off. The
    backend passes its settings (the ``env-unpack-*`` keys); these
    defaults are the same, for running the helper by hand."""

    max_bytes: int = 32 << 30  # env-unpack-max-bytes: the tar stream, decompressed
    max_members: int = 1_000_000  # env-unpack-max-members
    max_ratio: int = 100  # env-unpack-max-ratio: decompressed bytes per archive byte
    # The ratio counts only beyond this many bytes: a small archive of
    # zeros is no bomb.
    ratio_floor: int = 64 << 20
    # The largest single read tarfile may ask for: member data is read in
    # 16 KiB pieces, so only a header (a long name, pax records) reads more,
    # and tarfile holds a header in memory whole.
    max_header: int = 1 << 20
    # Directories deep (an environment is some 15): walking a deeper tree
    # would pass Python's recursion limit.
    max_depth: int = 200


# ------------------------------------------------------------------ paths


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@contextlib.contextmanager
def opened(archive: Path) -> Iterator[BinaryIO]:
    try:
        # Non-blocking: a FIFO in its place must not hang the load.
        fd = os.open(archive, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        raise EnvError(f"cannot read {archive}: {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise EnvError(f"{archive} is neither a directory nor an archive file")
        yield f


class _Metered:
    """The decompressed tar stream, as tarfile reads it, checked against
    the limits before each read or seek: the position is what decompressing
    has produced (tarfile reads forward; a forward seek decompresses too)."""

    def __init__(
        self, inner: io.BufferedIOBase, archive: Path, packed: int, limits: Limits
    ) -> None:
        self._inner = inner
        self._archive = archive
        self._limits = limits
        self._packed = packed

    def _check(self, position: int) -> None:
        lim = self._limits
        if lim.max_bytes and position > lim.max_bytes:
            raise EnvError(
                f"{self._archive} unpacks to more than {lim.max_bytes} bytes "
                f"(env-unpack-max-bytes={lim.max_bytes})"
            )
        if lim.max_ratio and position > max(lim.ratio_floor, lim.max_ratio * self._packed):
            raise EnvError(
                f"{self._archive} ({self._packed} bytes) unpacks to more than {position} "
                f"bytes, over {lim.max_ratio} times its size "
                f"(env-unpack-max-ratio={lim.max_ratio}): a compression bomb?"
            )

    def read(self, size: int = -1) -> bytes:
        position = self._inner.tell()
        if size is None or size < 0:
            size = self._limits.max_header + 1
        if size > self._limits.max_header:
            raise EnvError(
                f"{self._archive}: a tar header of {size} bytes at offset {position} "
                f"(more than {self._limits.max_header})"
            )
        self._check(position + size)
        try:
            return self._inner.read(size)
        except Exception as e:  # zlib, lzma, bz2 and EOF errors of a corrupt stream
            raise EnvError(f"{self._archive} is not a readable tar archive: {e}") from e

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        target = offset if whence == os.SEEK_SET else self._inner.tell() + offset
        if whence not in (os.SEEK_SET, os.SEEK_CUR):
            raise OSError(errno.EINVAL, "seek from the end of a tar stream")
        self._check(target)
        try:
            return self._inner.seek(target)
        except Exception as e:  # seeking forward decompresses
            raise EnvError(f"{self._archive} is not a readable tar archive: {e}") from e

    def tell(self) -> int:
        return self._inner.tell()


def _decompressed(source: BinaryIO) -> io.BufferedIOBase:
    """The tar stream of the open archive ``source``, from its start: gzip,
    bzip2 and xz told by their magic bytes, anything else read as a plain
    tar. Closing it leaves ``source`` open."""
    source.seek(0)
    magic = source.read(6)
    source.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=source, mode="rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(source)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(source)
    plain = os.dup(source.fileno())  # shares the offset, which buffering left anywhere
    os.lseek(plain, 0, os.SEEK_SET)
    return os.fdopen(plain, "rb")


# Python's own checks on top of ours, where this Python has them (3.10.12+,
# 3.11.4+, 3.12+).
_FILTER: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
_FILTER_ERROR: Any = getattr(tarfile, "FilterError", ())


def extract(
    archive: Path, dest: Path, limits: Limits = Limits(), source: BinaryIO | None = None
) -> None:
    """Unpacks ``archive`` into the empty directory ``dest``, member by
    member, refusing any member that could write outside ``dest`` and
    stopping at ``limits``. Modes are kept for the owner (executables stay
    executable) without write permission: the finished tree is read-only.
    Set-id bits and ownership are dropped, and modification times are kept
    (so bytecode caches stay valid). ``source``: the archive, already open.
    """
    root = os.path.realpath(dest)
    directories: list[tuple[str, tarfile.TarInfo]] = []
    members = 0
    try:
        with contextlib.ExitStack() as stack:
            if source is None:
                source = stack.enter_context(opened(archive))
            raw = stack.enter_context(_decompressed(source))
            packed = os.fstat(source.fileno()).st_size
            metered = cast(IO[bytes], _Metered(raw, archive, packed, limits))
            tar = stack.enter_context(tarfile.open(fileobj=metered, mode="r:"))
            for member in tar:
                members += 1
                if limits.max_members and members > limits.max_members:
                    raise EnvError(
                        f"{archive} has more than {limits.max_members} members "
                        f"(env-unpack-max-members={limits.max_members})"
                    )
                if member.name.count("/") >= limits.max_depth:
                    raise EnvError(
                        f"archive member {member.name[:200]!r}...: nested deeper than "
                        f"{limits.max_depth} directories"
                    )
                target = check_member(member, root)
                try:
                    tar.extract(member, root, set_attrs=False, **_FILTER)
                except _FILTER_ERROR as e:
                    raise EnvError(f"archive member {member.name!r}: {e}") from e
                if member.isdir():
                    os.chmod(target, 0o700)  # owner-writable until its members are in
                    directories.append((target, member))
                elif member.isreg() or member.islnk():
                    os.chmod(target, (member.mode & 0o755) | 0o600)
                    os.utime(target, (member.mtime, member.mtime))
    except EnvError:
        raise
    except tarfile.TarError as e:
        raise EnvError(f"{archive} is not a readable tar archive: {e}") from e
    except Exception as e:  # a corrupt stream (zlib, lzma, bz2), a full disk ...
        raise EnvError(f"unpacking {archive} failed: {type(e).__name__}: {e}") from e
    check_links(root)
    _make_read_only(root)
    for target, member in reversed(directories):
        os.chmod(target, member.mode & 0o555 | 0o500)
        os.utime(target, (member.mtime, member.mtime))


def _make_read_only(root: str) -> None:
    """Takes write permission away from every file and directory (links
    have no mode of their own), directories after their contents."""
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for path in [*(os.path.join(dirpath, n) for n in filenames), dirpath]:
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o222)


# The kernel's limits on resolving a path: a name longer than PATH_MAX is
# refused (tarfile and the stubs pass whole paths), and so are more than
# MAXSYMLINKS links on one path.
_PATH_MAX = 4096
_MAX_LINK_HOPS = 40


class _Escape(Exception):
    """A path that leads, or may lead, outside the environment."""


def _resolve(root: str, start: list[str], rel: str) -> list[str]:
    """The components, under ``root``, of the directories of ``start`` then
    ``rel`` (a relative path), with every symbolic link on the way replaced
    by where it leads, read from the disk as the kernel would: one
    component at a time, with lstat and readlink, never through a path
    that still holds a link. Names that do not exist yet are taken as they
    are. Raises _Escape, saying why, when the path steps above ``root``,
    through an absolute link, or when it cannot be resolved exactly (too
    long, too many links, an error): unlike os.path.realpath, which gives
    up resolving past such an error and answers a path that may lie
    (CVE-2025-4517)."""
    stack = list(start)
    pending = list(reversed(rel.split("/")))
    hops = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            if not stack:
                raise _Escape("leads above the environment's root")
            stack.pop()
            continue
        path = os.path.join(root, *stack, name)
        if len(path.encode()) >= _PATH_MAX:
            raise _Escape(f"leads to a path longer than {_PATH_MAX} bytes (PATH_MAX)")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            stack.append(name)  # not there yet: taken as a plain name
            continue
        except OSError as e:
            raise _Escape(f"cannot be resolved exactly ({e.strerror})") from e
        if not stat.S_ISLNK(st.st_mode):
            stack.append(name)
            continue
        hops += 1
        if hops > _MAX_LINK_HOPS:
            raise _Escape(f"goes through more than {_MAX_LINK_HOPS} symbolic links")
        target = os.readlink(path)
        if target.startswith("/"):
            raise _Escape(f"goes through a symbolic link to the absolute path {target!r}")
        pending.extend(reversed(target.split("/")))
    return stack


def check_member(member: tarfile.TarInfo, root: str) -> str:
    """Where ``member`` would land under ``root`` (a real path); raises
    EnvError naming it when it could write outside ``root``. Checked
    against what earlier members already put on disk: a path through a
    symbolic link is followed where it really leads, exactly (_resolve)."""

    def refuse(why: str) -> EnvError:
        return EnvError(f"archive member {member.name!r}: {why}")

    name = member.name
    if name.startswith("/"):
        raise refuse("absolute path")
    if ".." in name.split("/"):
        raise refuse("'..' in its path")
    if member.ischr() or member.isblk():
        raise refuse("device file")
    if member.isfifo():
        raise refuse("FIFO")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise refuse(f"unsupported member type {member.type!r}")
    rel = os.path.normpath(name)
    target = os.path.join(root, rel)
    if len(target.encode()) >= _PATH_MAX:
        raise refuse(f"its path is longer than {_PATH_MAX} bytes (PATH_MAX)")
    try:
        parent = _resolve(root, [], os.path.dirname(rel))
    except _Escape as e:
        raise refuse(f"its directory leads outside the environment: it {e}") from None
    landing = os.path.join(root, *parent, os.path.basename(rel))
    if len(landing.encode()) >= _PATH_MAX:
        raise refuse(f"it lands on a path longer than {_PATH_MAX} bytes (PATH_MAX)")
    try:
        there = os.lstat(landing)
    except FileNotFoundError:
        there = None
    except OSError as e:
        raise refuse(f"cannot be checked ({e.strerror})") from None
    if there is not None and stat.S_ISLNK(there.st_mode):
        raise refuse("it replaces a symbolic link")
    if there is not None and stat.S_ISDIR(there.st_mode) and not member.isdir():
        raise refuse("it replaces a directory")
    if member.issym():
        if os.path.isabs(member.linkname):
            raise refuse(f"symbolic link to the absolute path {member.linkname!r}")
        try:
            _resolve(root, parent, member.linkname)
        except _Escape as e:
            raise refuse(f"symbolic link leading outside the environment: it {e}") from None
    elif member.islnk():
        link = member.linkname
        if os.path.isabs(link) or ".." in link.split("/"):
            raise refuse(f"hard link to {link!r}, outside the environment")
        try:
            source = _resolve(root, [], os.path.dirname(os.path.normpath(link)))
        except _Escape as e:
            raise refuse(f"hard link to {link!r}, outside the environment: it {e}") from None
        source_path = os.path.join(root, *source, os.path.basename(os.path.normpath(link)))
        try:
            regular = stat.S_ISREG(os.lstat(source_path).st_mode)
        except OSError:
            regular = False
        if not regular:
            raise refuse(f"hard link to {link!r}, not a file unpacked before it")
    return target


def check_links(root: str) -> None:
    """Every symbolic link under ``root`` must lead inside it once all are in
    place (a link checked while another it goes through did not exist yet
    may have changed meaning)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for entry in dirnames + filenames:
            path = os.path.join(dirpath, entry)
            if os.path.islink(path):
                rel = os.path.relpath(path, root)
                try:
                    _resolve(root, rel.split("/")[:-1], os.readlink(path))
                except _Escape as e:
                    raise EnvError(
                        f"archive member {rel!r}: symbolic link leading outside the "
                        f"environment: it {e}"
                    ) from None
