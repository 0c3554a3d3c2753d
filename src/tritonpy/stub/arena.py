# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Shared-memory arenas of the stub (docs/protocol.md, *Arenas*).

``OwnArenas`` are memfds this process creates and allocates from (output
tensors, frame bodies); ``PeerArenas`` are the backend's memfds, mapped to
read input tensors in place. Nothing is ever named in /dev/shm: the kernel
frees a memfd when the last process holding it goes away.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import fcntl
import mmap
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

ALIGN = 64
DEFAULT_ARENA_SIZE = 64 << 20
_PUNCH_THRESHOLD = 1 << 20
# Freed space in the first 64 MiB of the arenas (in creation order) stays
# resident: first-fit reuses it, so repeated large outputs write to pages
# already mapped here and in the backend (no faults, no zeroing). Larger
# freed runs beyond it are punched out so their pages go back to the OS.
KEEP_RESIDENT = 64 << 20

_fallocate: Any = None
try:  # Linux fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE), best effort
    _libc = ctypes.CDLL(None, use_errno=True)
    _fallocate = _libc.fallocate
    _fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
except (OSError, AttributeError):  # pragma: no cover
    pass


_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
_TMPFS_MAGIC = 0x01021994
_fstatfs: Any = None
try:  # Linux fstatfs(2): struct statfs starts with its f_type (a long)
    _fstatfs = _libc.fstatfs
    _fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]
except (NameError, AttributeError):  # pragma: no cover
    pass


def _fs_type(fd: int) -> int | None:
    """The file system magic of ``fd`` (None when it cannot be told)."""
    if _fstatfs is None:  # pragma: no cover
        return None
    buf = ctypes.create_string_buffer(256)  # more than any struct statfs
    if _fstatfs(fd, buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value


def _check_memfd(arena_id: int, size: int, fd: int) -> None:
    """A backend arena must be a tmpfs memfd sealed against shrinking, at
    least ``size`` bytes long. The seals are read before the size: once
    F_SEAL_SHRINK is on, the size checked can only grow."""
    if _fs_type(fd) != _TMPFS_MAGIC:
        raise ValueError(f"arena {arena_id} is not a memfd on tmpfs")
    if not fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK:
        raise ValueError(f"arena {arena_id} is not sealed against shrinking")
    actual = os.fstat(fd).st_size
    if size > actual:
        raise ValueError(f"arena {arena_id}: announced {size} bytes, the memfd has {actual}")


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class _Arena:
    """One memfd with a first-fit free list (sorted by offset, coalesced)."""

    __slots__ = (
        "id",
        "size",
        "fd",
        "map",
        "view",
        "_free_offs",
        "_free_sizes",
        "used",
        "keep_resident",
        "base",
    )

    def __init__(self, arena_id: int, size: int, keep_resident: int = 0) -> None:
        self.id = arena_id
        self.size = size
        self.keep_resident = keep_resident  # bytes from offset 0 never punched
        self.fd = os.memfd_create(
            f"tritonpy-stub-{arena_id}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
        )
        os.fchmod(self.fd, 0o600)
        os.ftruncate(self.fd, size)
        # The backend refuses arenas that could shrink under its mapping;
        # this one never changes size, and its seals are final.
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, _SEALS)
        self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.view = memoryview(self.map)
        # The mapping's address: a model's array is found in its block by it.
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self._free_offs = [0]
        self._free_sizes = [size]
        self.used = 0

    def alloc(self, n: int) -> int | None:
        n = _round_up(max(n, 1), ALIGN)
        for i, sz in enumerate(self._free_sizes):
            if sz >= n:
                off = self._free_offs[i]
                if sz == n:
                    del self._free_offs[i]
                    del self._free_sizes[i]
                else:
                    self._free_offs[i] = off + n
                    self._free_sizes[i] = sz - n
                self.used += n
                return off
        return None

    def free(self, off: int, n: int) -> None:
        n = _round_up(max(n, 1), ALIGN)
        self.used -= n
        i = bisect.bisect_left(self._free_offs, off)
        start, size = off, n
        # Merge with the next block, then with the previous one.
        if i < len(self._free_offs) and self._free_offs[i] == off + n:
            size += self._free_sizes[i]
            del self._free_offs[i]
            del self._free_sizes[i]
        if i > 0 and self._free_offs[i - 1] + self._free_sizes[i - 1] == off:
            i -= 1
            start = self._free_offs[i]
            size += self._free_sizes[i]
            del self._free_offs[i]
            del self._free_sizes[i]
        self._free_offs.insert(i, start)
        self._free_sizes.insert(i, size)
        if n >= _PUNCH_THRESHOLD and _fallocate is not None:
            page = mmap.PAGESIZE
            lo, hi = _round_up(max(off, self.keep_resident), page), (off + n) // page * page
            if hi - lo >= _PUNCH_THRESHOLD:
                _fallocate(self.fd, 3, lo, hi - lo)  # PUNCH_HOLE | KEEP_SIZE


class _Block:
    """Arena space a model writes in place (``OwnArenas.block``)."""

    __slots__ = ("n", "holds", "alive")

    def __init__(self, n: int) -> None:
        self.n = n
        self.holds = 0  # tensors sent naming it (outputs, BLS inputs), not yet released
        self.alive = True  # its buffer (an array over it) still exists


class OwnArenas:
    """Arenas this process allocates from. ``announce(arena_id, size, fd)``
    is called once per new arena, before any frame refers to it.

    Besides the stub's own short-lived allocations (freed by the backend's
    RELEASE), a model can get a *block* to write a tensor into
    (``pb_utils.Tensor.empty``): the block is sent by reference, without a
    copy, and goes back to the free list only when no view of it is left
    and every tensor that named it (a response output, a BLS input) has
    been released. A RELEASE of a block that has no reference out is the
    backend's mistake: KeyError, as for any unknown allocation.
    """

    def __init__(
        self, announce: Callable[[int, int, int], None], default_size: int = DEFAULT_ARENA_SIZE
    ) -> None:
        self._announce = announce
        self._default = default_size
        self._arenas: dict[int, _Arena] = {}
        self._live: dict[tuple[int, int], int] = {}
        self._next_id = 1
        self._lock = threading.Lock()  # response senders allocate from any thread
        self._blocks: dict[tuple[int, int], _Block] = {}
        # (arena id, offset sent) -> the blocks whose bytes went out there
        self._sent: dict[tuple[int, int], list[tuple[int, int]]] = {}
        # Blocks whose buffer died. Appended by weakref callbacks, which
        # may run at any allocation (even inside this class, under the
        # lock): the list is only drained under the lock, at a safe point.
        self._dead: collections.deque[tuple[int, int]] = collections.deque()
        # Bytes ``place`` copied (the debug counters' bytes_copied).
        self.bytes_copied = 0
        # The backend's stub-max-arenas and stub-max-arena-bytes (INIT).
        self._max_arenas: float = float("inf")
        self._max_bytes: float = float("inf")

    def limit(self, max_arenas: float, max_bytes: float) -> None:
        """Stay within the backend's limits on this stub's arenas: an
        allocation that would pass them raises MemoryError (failing what
        needed it) instead of getting the stub killed for a protocol
        violation."""
        self._max_arenas, self._max_bytes = max_arenas, max_bytes

    def limits(self) -> tuple[float, float]:
        """What ``limit`` set: (max_arenas, max_bytes)."""
        return self._max_arenas, self._max_bytes

    def alloc(self, n: int) -> tuple[int, int, memoryview]:
        """Reserve ``n`` bytes; return (arena_id, offset, writable view)."""
        with self._lock:
            self._reap()
            return self._alloc(n)

    def _alloc(self, n: int) -> tuple[int, int, memoryview]:
        for a in self._arenas.values():
            off = a.alloc(n)
            if off is not None:
                break
        else:
            size = max(self._default, _round_up(2 * n, mmap.PAGESIZE))
            earlier = sum(x.size for x in self._arenas.values())
            if size > self._max_bytes - earlier:  # the room left, exactly
                size = _round_up(max(n, 1), mmap.PAGESIZE)
            if len(self._arenas) >= self._max_arenas or size > self._max_bytes - earlier:
                # The official backend's text when its pool cannot grow.
                raise MemoryError(
                    "Failed to increase the shared memory pool size: tritonpy:"
                    f" {n} bytes more would take the stub's arenas past the backend's"
                    f" stub-max-arenas={self._max_arenas} or stub-max-arena-bytes="
                    f"{self._max_bytes} ({len(self._arenas)} arenas of {earlier} bytes"
                    " in use)"
                )
            a = _Arena(self._next_id, size, max(0, KEEP_RESIDENT - earlier))
            self._next_id += 1
            self._arenas[a.id] = a
            self._announce(a.id, a.size, a.fd)
            off = a.alloc(n)
            assert off is not None
        self._live[(a.id, off)] = n
        return a.id, off, a.view[off : off + n]

    def free(self, arena_id: int, offset: int) -> None:
        """The backend is done with the bytes at (arena_id, offset)."""
        with self._lock:
            self._reap()
            key = (arena_id, offset)
            blocks = self._sent.get(key)
            if blocks:  # a model's block, sent by reference
                block_key = blocks.pop()
                if not blocks:
                    del self._sent[key]
                self._drop_hold(block_key)
                return
            if key in self._blocks:  # a block with no reference out
                raise KeyError(f"arena {arena_id} offset {offset} was not sent (or is back)")
            self._free(arena_id, offset)

    def _free(self, arena_id: int, offset: int) -> None:
        n = self._live.pop((arena_id, offset), None)
        if n is None:
            raise KeyError(f"no live allocation at arena {arena_id} offset {offset}")
        self._arenas[arena_id].free(offset, n)

    def place(self, data: memoryview) -> tuple[int, int]:
        """(arena id, offset) where the backend reads ``data`` (flat bytes):
        inside the block a model wrote it in (held until released), else a
        new allocation it is copied into (freed on release). Either way
        ``free`` of the pair gives it back."""
        n = data.nbytes
        if n and self._blocks:  # (an unlocked peek: only a live block can match)
            ref = self._hold(np.frombuffer(data, np.uint8).ctypes.data, n)
            if ref is not None:
                return ref
        aid, off, view = self.alloc(n)
        try:
            view[:] = data
        except BaseException:
            self.free(aid, off)
            raise
        with self._lock:
            self.bytes_copied += n
        return aid, off

    # ------------------------------------------------------------ blocks

    def block(self, n: int) -> Any:
        """``n`` (> 0) writable bytes for a model to fill: a buffer object
        (a ctypes array over the arena). They stay reserved as long as it
        exists; an array made over it (numpy.frombuffer) keeps it alive,
        as does every view of that array."""
        with self._lock:
            self._reap()
            aid, off, _ = self._alloc(n)
            self._blocks[(aid, off)] = _Block(n)
            buf = (ctypes.c_char * n).from_buffer(self._arenas[aid].map, off)
        weakref.finalize(buf, self._dead.append, (aid, off)).atexit = False
        return buf

    def _hold(self, address: int, n: int) -> tuple[int, int] | None:
        """If the ``n`` bytes at ``address`` lie inside a block, (arena id,
        offset) to send them by reference, counted until ``free`` of that
        pair; else None."""
        with self._lock:
            for (aid, off), b in self._blocks.items():
                start = self._arenas[aid].base + off
                if start <= address and address + n <= start + b.n:
                    sent = (aid, off + address - start)
                    b.holds += 1
                    self._sent.setdefault(sent, []).append((aid, off))
                    return sent
        return None

    def _drop_hold(self, key: tuple[int, int]) -> None:
        b = self._blocks[key]
        b.holds -= 1
        if b.holds == 0 and not b.alive:
            del self._blocks[key]
            self._free(*key)

    def _reap(self) -> None:
        while self._dead:
            key = self._dead.popleft()
            b = self._blocks[key]
            b.alive = False
            if b.holds == 0:
                del self._blocks[key]
                self._free(*key)

    @property
    def live_bytes(self) -> int:
        with self._lock:
            self._reap()
            return sum(self._live.values())

    @property
    def free_bytes(self) -> int:
        """Bytes not allocated in the arenas made so far (more are made
        on demand: no limit)."""
        with self._lock:
            self._reap()
            return sum(a.size - a.used for a in self._arenas.values())

    @property
    def live_count(self) -> int:
        with self._lock:
            self._reap()
            return len(self._live)


class UnmappedArena(ValueError):
    """A backend arena this stub could not map (its address space is
    limited): what lies in it fails, the stub serves on."""


class PeerArenas:
    """The backend's arenas, mapped read-write so input views are writable.

    An arena the kernel refuses to map (``mmap`` fails: the sandbox's
    address-space limit, stub-sandbox-address-space-bytes) does not end the
    stub: its descriptor is kept, the mapping is tried again when a frame
    refers to it, and while it still fails the requests with inputs there
    fail alone (``UnmappedArena``, naming the arena and the kernel's error).
    """

    # What view() raises for such an arena (the compiled request path
    # catches it through the arenas it is given).
    Unmapped = UnmappedArena

    def __init__(self) -> None:
        self._views: dict[int, memoryview] = {}
        self._maps: dict[int, mmap.mmap] = {}
        self._bases: dict[int, int] = {}
        # Arenas announced but not mapped: id -> (size, fd, why)
        self._unmapped: dict[int, tuple[int, int, str]] = {}

    def add(self, arena_id: int, size: int, fd: int) -> None:
        try:
            if arena_id in self._maps or arena_id in self._unmapped:
                raise ValueError(f"arena {arena_id} announced twice")
            _check_memfd(arena_id, size, fd)
        except BaseException:
            os.close(fd)
            raise
        try:
            m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:  # kept: mapped when a frame needs it, if it can be then
            self._unmapped[arena_id] = (size, fd, str(e))
            return
        os.close(fd)
        self._keep(arena_id, m)

    def _keep(self, arena_id: int, m: mmap.mmap) -> None:
        self._maps[arena_id] = m
        self._views[arena_id] = memoryview(m)
        # The mapping's address: outputs that alias inputs are found by it.
        self._bases[arena_id] = ctypes.addressof(ctypes.c_char.from_buffer(m))

    def _map_late(self, arena_id: int) -> memoryview | None:
        """Maps an arena that could not be mapped when announced; raises
        UnmappedArena while it still cannot be; None for an unknown id."""
        entry = self._unmapped.get(arena_id)
        if entry is None:
            return None
        size, fd, why = entry
        try:
            m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            self._unmapped[arena_id] = (size, fd, str(e))
            raise UnmappedArena(
                f"backend arena {arena_id} of {size} bytes could not be mapped in the"
                f" stub ({e}); its address space is limited by"
                " stub-sandbox-address-space-bytes"
            ) from None
        del self._unmapped[arena_id]
        os.close(fd)
        self._keep(arena_id, m)
        return self._views[arena_id]

    def address(self, arena_id: int) -> int:
        """The address where backend arena ``arena_id`` is mapped here."""
        return self._bases[arena_id]

    def view(self, arena_id: int, offset: int, n: int) -> memoryview:
        v = self._views.get(arena_id)
        if v is None:
            v = self._map_late(arena_id)
            if v is None:
                raise ValueError(f"unknown backend arena {arena_id}")
        if offset > len(v) or n > len(v) - offset:
            raise ValueError(
                f"{n} bytes at offset {offset} lie outside backend arena {arena_id}"
                f" of {len(v)} bytes"
            )
        return v[offset : offset + n]
