# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The content-addressed cache of unpacked archives: one read-only tree per
archive content, named by its sha256, with a manifest (every entry's type,
mode, size, times and inode) beside it; a tree that no longer matches its
manifest is unpacked again before it is used."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .extract import EnvError, Limits, extract, opened


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tritonpy/envs`` (``~/.cache/tritonpy/envs``), or
    ``tritonpy-envs-<uid>`` in the temporary directory when there is no
    writable home (containers with an arbitrary user id)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    preferred = Path(base) / "tritonpy" / "envs"
    try:
        preferred.mkdir(mode=0o700, parents=True, exist_ok=True)
        return preferred
    except OSError:
        return Path(tempfile.gettempdir()) / f"tritonpy-envs-{os.getuid()}"


def prepare_cache_dir(path: Path) -> Path:
    """Creates the cache directory, owned by this user with mode 0700 (an
    existing one with a wider mode is narrowed; one owned by another user is
    refused: whoever can write there chooses the code the stubs run). The
    directory itself must not be a symbolic link: in a shared temporary
    directory anyone can plant one where the cache is expected, leading to
    a directory they control (or one of ours they want written)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(path):
            raise EnvError(
                f"the cache directory {path} is a symbolic link (to {os.readlink(path)!r}), "
                "which is refused: someone else may have planted it; remove it, or set "
                "env-cache-dir to a real directory of this user"
            ) from e
        if e.errno == errno.ENOTDIR:
            raise EnvError(f"the cache directory {path} is not a directory") from e
        raise EnvError(f"cannot create the cache directory {path}: {e.strerror}") from e
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise EnvError(
                f"the cache directory {path} belongs to user id {st.st_uid}, not to this "
                f"user ({os.getuid()}): set env-cache-dir to a directory of this user"
            )
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return path


# ------------------------------------------------------------- unpacking


def unpack(archive: Path, cache: Path, limits: Limits = Limits()) -> tuple[Path, bool, str | None]:
    """The unpacked tree of ``archive`` under ``cache``, whether this call
    unpacked it (False: an earlier one did), and, when it unpacked it again
    because the tree had been changed since, what had changed. Safe against
    concurrent callers: one unpacks under a lock, into a staging directory
    renamed into place when complete, so a tree that exists is whole."""
    prepare_cache_dir(cache)
    # One open file for the digest and the unpacking: the bytes unpacked
    # are the bytes the tree is named after, even if the path is replaced
    # meanwhile; a change in place moves the file's change time.
    with opened(archive) as source:
        stamp = _stamp(source)
        name = _content_key(archive, cache, source, stamp)
        return _unpack_as(archive, source, stamp, cache, name, limits)


def _unpack_as(
    archive: Path, source: BinaryIO, stamp: list[int], cache: Path, name: str, limits: Limits
) -> tuple[Path, bool, str | None]:
    final = cache / name
    manifest = cache / f"{name}.manifest"
    if check_tree(final, manifest) is None:
        return final, False, None
    with _locked(cache / f".{name}.lock"):
        changed = check_tree(final, manifest)
        if changed is None:
            return final, False, None
        if os.path.lexists(final):
            # Out of the way first (stubs still running from it keep their
            # open files), then removed.
            aside = cache / f".{name}.changed-{secrets.token_hex(4)}"
            os.rename(final, aside)
            remove_tree(aside)
        else:
            changed = None  # never unpacked, or removed by hand: nothing to report
        # Left by a process that died while unpacking: nobody else holds the lock.
        for stale in [*cache.glob(f".{name}.tmp-*"), *cache.glob(f".{name}.changed-*")]:
            remove_tree(stale)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=cache))
        try:
            extract(archive, staging, limits, source)
            if _stamp(source) != stamp:
                raise EnvError(f"{archive} was changed while it was unpacked: load the model again")
            os.rename(staging, final)
        except BaseException:
            remove_tree(staging)
            raise
        _write_json(manifest, scan_tree(final))
    return final, True, changed


def _stamp(f: BinaryIO) -> list[int]:
    """The open file's identity, size and times."""
    st = os.fstat(f.fileno())
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _content_key(archive: Path, cache: Path, source: BinaryIO, stamp: list[int]) -> str:
    """sha256 of the archive's bytes (first 32 hex digits), read from
    ``source``. Hashing a large archive takes seconds, so the digest is
    remembered per archive path with the file's ``stamp`` (identity, size
    and times), and reused while they are unchanged."""
    index = cache / "index"
    index.mkdir(mode=0o700, exist_ok=True)
    memo = index / (hashlib.sha256(os.fsencode(archive.resolve())).hexdigest()[:32] + ".json")
    try:
        known = json.loads(memo.read_text())
        if known["stamp"] == stamp:
            return str(known["key"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    digest = hashlib.sha256()
    try:
        source.seek(0)
        while chunk := source.read(1 << 20):
            digest.update(chunk)
    except OSError as e:
        raise EnvError(f"cannot read {archive}: {e.strerror}") from e
    key = digest.hexdigest()[:32]
    _write_json(memo, {"stamp": stamp, "key": key, "archive": str(archive)})
    return key


def _write_json(path: Path, value: Any) -> None:
    """Writes ``path`` whole or not at all."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(value, f)
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def remove_tree(path: Path) -> None:
    """Removes a tree, read-only ones too (a finished tree, or a staging
    directory made read-only just before a crash). A link is removed,
    never followed."""
    if os.path.islink(path) or not os.path.isdir(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    for dirpath, dirnames, _ in os.walk(path):
        for d in [dirpath, *(os.path.join(dirpath, n) for n in dirnames)]:
            with contextlib.suppress(OSError):
                if not os.path.islink(d):
                    os.chmod(d, 0o700)
    shutil.rmtree(path, ignore_errors=True)


# -------------------------------------------------- the unpacked tree's manifest


def scan_tree(root: Path) -> list[list[Any]]:
    """What identifies each entry under ``root``: its path, type and mode,
    size, modification and change times, and inode. The change time moves
    on every write, chmod, rename or new link and cannot be set back, so
    an entry changed in any ordinary way no longer matches. The root's own
    change time is left out: renaming it into place moves it."""
    top = os.lstat(root)
    entries: list[list[Any]] = [[".", top.st_mode, top.st_mtime_ns]]

    # Depth first, without recursion (an archive may nest deeper than
    # Python's recursion limit).
    pending = [(str(root), "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as it:
            children = sorted(it, key=lambda e: e.name)
        subdirectories = []
        for child in children:
            st = child.stat(follow_symlinks=False)
            rel = prefix + child.name
            entries.append([rel, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
            if stat.S_ISDIR(st.st_mode):
                subdirectories.append((child.path, rel + "/"))
        pending.extend(reversed(subdirectories))
    return entries


def check_tree(root: Path, manifest: Path) -> str | None:
    """None when ``root`` is an unpacked tree that matches its manifest;
    else what is wrong with it ("missing" when there is none)."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return "missing"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory (a symbolic link?)"
    try:
        expected = json.loads(manifest.read_text())
    except FileNotFoundError:
        return "it has no manifest (unpacked by an earlier tritonpy, or interrupted)"
    except (OSError, ValueError) as e:
        return f"its manifest {manifest} is unreadable: {e}"
    try:
        actual = scan_tree(root)
    except OSError as e:  # being moved aside by another process, or changed under us
        return f"it cannot be read whole: {e}"
    if actual == expected:
        return None
    # The first difference: an entry added or removed (which modifies its
    # directory too) before one modified.
    before = {str(e[0]): e for e in expected if isinstance(e, list) and e}
    after = {e[0]: e for e in actual}
    for path in sorted(set(before) ^ set(after)):
        return f"{path!r} was {'added' if path in after else 'removed'}"
    for path in sorted(after):
        if before[path] != after[path]:
            return f"{path!r} was modified"
    return "its manifest does not match"
