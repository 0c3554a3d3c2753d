# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Execution environments: the ``EXECUTION_ENV_PATH`` of a model turned into
the interpreter, and the environment variables, that run its stubs.

The backend runs ``python -m tritonpy.exec_env`` with its own interpreter
(``python-executable``) once per model load, before any stub starts. It
prints one JSON object on stdout, or an error on stderr and exits with 2.

``EXECUTION_ENV_PATH`` names a directory holding a Python installation (a
conda environment, a virtual environment) or a tar archive of one
(conda-pack output; gzip, bzip2, xz or plain). Archives are unpacked into a
private cache directory, once per content: a reload, or another model naming
the same bytes, reuses the unpacked tree. Unpacking refuses any member that
could write outside its directory (absolute paths, ``..``, links leading out,
devices, FIFOs) and fails the load naming it, and stops at limits on the
bytes unpacked, the member count and the compression ratio (``Limits``).
An unpacked tree is made read-only and its manifest (every entry's type,
mode, size, times and inode) is written beside it; a tree that no longer
matches its manifest is unpacked again before it is used.

The stub needs tritonpy: either the environment has it installed, or its
Python has the same minor version as the backend's interpreter, in which case
tritonpy (and uvloop, if the environment lacks it) is lent to it through
``PYTHONPATH``; numpy must then come from the environment.
"""

from __future__ import annotations

import argparse
import bz2
import contextlib
import errno
import fcntl
import gzip
import hashlib
import importlib.util
import io
import json
import lzma
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

import tritonpy

MODEL_DIR_VAR = "$$TRITON_MODEL_DIRECTORY"

# What the environment's interpreter is asked, in isolated mode (no
# PYTHONPATH, no user site-packages: what the stub itself will see).
_PROBE = (
    "import importlib.util as u, json, sys\n"
    "def has(m):\n"
    "    try:\n"
    "        return u.find_spec(m) is not None\n"
    "    except Exception:\n"
    "        return False\n"
    "print(json.dumps({'version': list(sys.version_info[:2]), 'prefix': sys.prefix,"
    " 'modules': {m: has(m) for m in ('tritonpy.stub', 'numpy', 'uvloop')}}))\n"
)
PROBE_TIMEOUT = 120.0


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


def resolve_path(value: str, model_dir: str) -> Path:
    """``EXECUTION_ENV_PATH`` as a path. ``$$TRITON_MODEL_DIRECTORY`` at its
    start stands for the model's directory, and the result must stay inside
    it; any other value must be absolute."""
    if value.startswith(MODEL_DIR_VAR):
        root = os.path.normpath(model_dir)
        path = os.path.normpath(root + value[len(MODEL_DIR_VAR) :])
        if not _within(path, root):
            raise EnvError(f"{path} is outside the model directory {root}")
        return Path(path)
    if not os.path.isabs(value):
        raise EnvError(f"must be an absolute path or start with {MODEL_DIR_VAR}")
    return Path(value)


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


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


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
    with _opened(archive) as source:
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
            _remove_tree(aside)
        else:
            changed = None  # never unpacked, or removed by hand: nothing to report
        # Left by a process that died while unpacking: nobody else holds the lock.
        for stale in [*cache.glob(f".{name}.tmp-*"), *cache.glob(f".{name}.changed-*")]:
            _remove_tree(stale)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=cache))
        try:
            extract(archive, staging, limits, source)
            if _stamp(source) != stamp:
                raise EnvError(f"{archive} was changed while it was unpacked: load the model again")
            os.rename(staging, final)
        except BaseException:
            _remove_tree(staging)
            raise
        _write_json(manifest, scan_tree(final))
    return final, True, changed


@contextlib.contextmanager
def _opened(archive: Path) -> Iterator[BinaryIO]:
    try:
        # Non-blocking: a FIFO in its place must not hang the load.
        fd = os.open(archive, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        raise EnvError(f"cannot read {archive}: {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise EnvError(f"{archive} is neither a directory nor an archive file")
        yield f


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


def _remove_tree(path: Path) -> None:
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
                source = stack.enter_context(_opened(archive))
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


def check_member(member: tarfile.TarInfo, root: str) -> str:
    """Where ``member`` would land under ``root`` (a real path); raises
    EnvError naming it when it could write outside ``root``. Checked
    against what earlier members already put on disk: a path through a
    symbolic link is followed where it really leads."""

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
    parent = os.path.realpath(os.path.dirname(target))
    if not _within(parent, root):
        raise refuse(f"its directory leads outside the environment (to {parent})")
    if os.path.islink(target):
        raise refuse("it replaces a symbolic link")
    if member.issym():
        if os.path.isabs(member.linkname):
            raise refuse(f"symbolic link to the absolute path {member.linkname!r}")
        lands = os.path.realpath(os.path.join(parent, member.linkname))
        if not _within(lands, root):
            raise refuse(f"symbolic link leading outside the environment (to {lands})")
    elif member.islnk():
        link = member.linkname
        if os.path.isabs(link) or ".." in link.split("/"):
            raise refuse(f"hard link to {link!r}, outside the environment")
        source = os.path.join(root, os.path.normpath(link))
        lands = os.path.realpath(source)
        if not _within(lands, root) or not os.path.isfile(source) or os.path.islink(source):
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
                lands = os.path.realpath(path)
                if not _within(lands, root):
                    rel = os.path.relpath(path, root)
                    raise EnvError(
                        f"archive member {rel!r}: symbolic link leading outside the "
                        f"environment (to {lands})"
                    )


# ----------------------------------------------------------- interpreter


def find_interpreter(root: Path) -> Path:
    for name in ("python3", "python"):
        candidate = root / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise EnvError(
        f"{root} has no bin/python3 or bin/python: an execution environment is a Python "
        "installation (a conda environment or virtual environment, or a conda-pack archive)"
    )


def probe(python: Path) -> dict[str, Any]:
    """Asks the environment's interpreter its version and which of the
    modules the stub needs it can import by itself."""
    try:
        proc = subprocess.run(
            [str(python), "-I", "-B", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvError(f"cannot run {python}: {e}") from e
    if proc.returncode != 0:
        raise EnvError(
            f"{python} does not run (exit status {proc.returncode}): {proc.stderr.strip()[-800:]}"
        )
    try:
        info: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        raise EnvError(f"{python} gave an unexpected answer: {proc.stdout[-200:]!r}") from e
    return info


def lend_tritonpy(cache: Path, with_uvloop: bool) -> Path:
    """A directory holding links to this installation's tritonpy (and
    uvloop), put on the stub's PYTHONPATH; nothing else of this
    installation's site-packages is visible through it."""
    # The installed package (a checkout's tritonpy/ may come first on the
    # path: tritonpy/__init__.py).
    package = next(
        (Path(d).resolve() for d in tritonpy.__path__ if (Path(d) / "stub").is_dir()),
        Path(tritonpy.__file__).resolve().parent,
    )
    if not (package / "stub").is_dir():
        raise EnvError(
            f"tritonpy at {package} is not a regular installation (editable?), so it "
            "cannot be lent to the environment: install tritonpy into the environment"
        )
    links = {"tritonpy": package}
    if with_uvloop:
        spec = importlib.util.find_spec("uvloop")
        if spec is not None and spec.submodule_search_locations:
            links["uvloop"] = Path(next(iter(spec.submodule_search_locations))).resolve()
    tag = json.dumps({k: str(v) for k, v in sorted(links.items())}).encode()
    version = f"py{sys.version_info[0]}.{sys.version_info[1]}"
    shim = cache / "lent" / f"{version}-{hashlib.sha256(tag).hexdigest()[:16]}"
    expected = {name: str(target) for name, target in links.items()}

    def intact() -> bool:
        # Exactly these links: what a model's code may have put there
        # instead would run in every stub it is lent to.
        try:
            if not stat.S_ISDIR(os.lstat(shim).st_mode):
                return False
            with os.scandir(shim) as it:
                return {e.name: os.readlink(e.path) for e in it} == expected
        except OSError:
            return False

    if intact():
        return shim
    prepare_cache_dir(cache)
    shim.parent.mkdir(mode=0o700, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".lent-", dir=shim.parent))
    for name, target in expected.items():
        os.symlink(target, staging / name)
    os.chmod(staging, 0o500)
    if os.path.lexists(shim) and not intact():
        aside = shim.parent / f".changed-{secrets.token_hex(4)}"
        with contextlib.suppress(OSError):
            os.rename(shim, aside)
            _remove_tree(aside)
    try:
        os.rename(staging, shim)
    except OSError:  # another process made it first
        _remove_tree(staging)
    if not intact():
        raise EnvError(f"{shim} keeps changing while it is made: load the model again")
    return shim


def stub_environment(root: Path, cache: Path, *, unpacked: bool = False) -> dict[str, Any]:
    """The interpreter of the environment at ``root`` and the variables its
    stubs get: PATH starts with the environment's bin/, PYTHONHOME and the
    server's PYTHONPATH are dropped (the environment is what the model sees,
    as with the official backend's stub), user site-packages are off. In an
    ``unpacked`` (read-only, checked) tree Python writes no bytecode: a
    stub running as root would write it anyway, and the tree would no
    longer match its manifest."""
    python = find_interpreter(root)
    info = probe(python)
    version = tuple(info.get("version", ()))
    modules = info.get("modules", {})
    variables = {
        "PATH": f"{root}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONNOUSERSITE": "1",
    }
    if unpacked:
        variables["PYTHONDONTWRITEBYTECODE"] = "1"
    unset = ["PYTHONHOME", "PYTHONPATH"]
    if not modules.get("tritonpy.stub"):
        ours = tuple(sys.version_info[:2])
        if version != ours:
            have = ".".join(map(str, version)) or "unknown"
            raise EnvError(
                f"its Python is {have} and has no tritonpy: install tritonpy into the "
                f"environment, or use Python {ours[0]}.{ours[1]} (the backend's "
                "python-executable), to which the backend lends its own tritonpy"
            )
        if not modules.get("numpy"):
            raise EnvError("it has no numpy, which tritonpy needs: install numpy into it")
        variables["PYTHONPATH"] = str(lend_tritonpy(cache, not modules.get("uvloop")))
        unset.remove("PYTHONPATH")
    return {
        "python": str(python),
        "root": str(root),
        "version": ".".join(map(str, version)),
        "lent": "PYTHONPATH" in variables,
        "set": variables,
        "unset": unset,
    }


def prepare(
    value: str, model_dir: str, cache_dir: str | None, limits: Limits = Limits()
) -> dict[str, Any]:
    """Everything the backend needs to start the stubs of a model whose
    ``EXECUTION_ENV_PATH`` is ``value``."""
    path = resolve_path(value, model_dir)
    if not path.exists():
        raise EnvError(f"{path} does not exist")
    start = time.monotonic()
    extracted = False
    changed = None
    cache = prepare_cache_dir(Path(cache_dir) if cache_dir else default_cache_dir())
    if path.is_dir():
        root = path.resolve()
    else:
        root, extracted, changed = unpack(path, cache, limits)
    result = stub_environment(root, cache, unpacked=not path.is_dir())
    result.update(
        path=str(path),
        archive=not path.is_dir(),
        extracted=extracted,
        changed=changed,
        seconds=round(time.monotonic() - start, 3),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonpy.exec_env",
        description="Prepares a model's execution environment (EXECUTION_ENV_PATH) for "
        "tritonpy's stubs. Run by the backend when a model loads.",
    )
    parser.add_argument("--path", required=True, help="the EXECUTION_ENV_PATH parameter")
    parser.add_argument("--model-dir", required=True, help="the model's directory")
    parser.add_argument("--cache-dir", default="", help="where archives are unpacked")
    default = Limits()
    for name, what in (
        ("max-bytes", "bytes of tar stream unpacked"),
        ("max-members", "members"),
        ("max-ratio", "decompressed bytes per archive byte"),
    ):
        field = name.replace("-", "_")
        parser.add_argument(
            f"--{name}",
            type=int,
            default=getattr(default, field),
            help=f"at most this many {what} per archive; 0: no limit (env-unpack-{name})",
        )
    args = parser.parse_args(argv)
    limits = Limits(
        max_bytes=args.max_bytes, max_members=args.max_members, max_ratio=args.max_ratio
    )
    try:
        result = prepare(args.path, args.model_dir, args.cache_dir or None, limits)
    except EnvError as e:
        print(e, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
