# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""BLS from a process the stub forked (a ``multiprocessing`` pool inside
``execute``, say): the child's own connection to the backend.

A forked child inherits the stub's socket, but it cannot use it: the
stub's loop (or whoever reads in turn) would read the child's answers, and
the child's call ids would collide with the stub's. So at its first call
the child makes a socket pair, sends one end to the backend in a
BLS_CHANNEL frame over the inherited socket (one SEQPACKET message: it
never interleaves with the stub's own frames) and from then on talks BLS
over the other end alone: its own call ids, its own arenas for large
inputs, the backend's BLS arenas announced to it again (docs/protocol.md,
"BLS_CHANNEL"). The backend cancels the child's calls in flight when the
child exits and closes its end.

Inside the child nothing of the stub's machinery is used: its loop, its
turns and its sending lock belong to the parent, and a lock another thread
held at the fork stays held in the child forever. The child's calls block
their thread until answered; ``async_exec`` in a child waits on a thread of
the child's own event loop's executor, so that its coroutines' calls are in
flight together. One thread at a time reads the socket; a thread whose
answer another one read finds it there when the lock comes round.
"""

from __future__ import annotations

import array
import asyncio
import itertools
import os
import select
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from tritonpy.pb_utils._seam import TritonModelException, pb_utils
from tritonpy.stub import _bls_wire
from tritonpy.stub import _codec as C
from tritonpy.stub._bls_wire import Call
from tritonpy.stub.arena import OwnArenas
from tritonpy.stub.bls import _TIMEOUT_GRACE, BlsClient
from tritonpy.stub.outbound import finish_frame

if TYPE_CHECKING:
    from tritonpy.stub.names import ModelNames
    from tritonpy.stub.pb_host import PbHost

_Response = pb_utils.InferenceResponse
_TritonError = pb_utils.TritonError
_ITER = pb_utils.ResponseIterator
# How long one read of the socket waits before the waiter looks at its
# deadline again.
_READ_WAIT = 0.05
_FDS_SPACE = socket.CMSG_SPACE(4 * array.array("i").itemsize)


def _send_fd(sock: socket.socket, frame: bytes, fd: int) -> None:
    """One frame with one descriptor, on a socket that may be non-blocking
    (the stub's own, inherited): waits for room instead of failing."""
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
    while True:
        try:
            sock.sendmsg([frame], rights)
            return
        except BlockingIOError:
            _wait_for(sock, select.POLLOUT, 1.0)


def _wait_for(sock: socket.socket, events: int, timeout: float) -> bool:
    """Whether ``sock`` is ready for ``events`` within ``timeout`` seconds
    (poll: any descriptor number, unlike select)."""
    p = select.poll()
    p.register(sock, events)
    return bool(p.poll(int(timeout * 1000)))


class ForkedBls(BlsClient):
    """The BLS client of a forked child. Everything it answers through is
    its parent class's (responses, arenas, leases, time-outs); the sending
    and the waiting are its own."""

    def __init__(
        self,
        stub_sock: socket.socket,
        names: ModelNames,
        own: OwnArenas,
        announcing: list[tuple[int, int, int]],
    ) -> None:
        # (BlsClient.__init__ is not called: none of the stub's parts is
        # the child's. The attributes its inherited methods use are set here.)
        self.names = names
        self._pid = os.getpid()
        self._loop_thread = -1  # no thread here has a loop to wake
        self._calls: dict[int, Call] = {}
        self._ids = itertools.count(1)
        self._arenas = {}
        self._unmapped = {}
        self._releases: list[tuple[int, int]] = []
        self._release_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._read_lock = threading.Lock()
        # The arenas of this process (pb_utils.Tensor.empty's too), and
        # those of them still to announce (appended by ``own``).
        self.own = own
        self._announcing = announcing
        self._closed = ""  # why the connection is gone, once it is
        self._forked = None  # (this client is the forked process's own)
        self.instance_count = 2  # a child never holds the stub's instance
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            _send_fd(stub_sock, C.encode_simple(C.BLS_CHANNEL, None), theirs.fileno())
        except OSError as e:
            mine.close()
            raise TritonModelException(
                f"tritonpy: {names.model}: a forked child could not connect to the server: {e}"
            ) from None
        finally:
            theirs.close()
        self.sock = mine

    # ---------------------------------------------------------------- sending

    def _send(self, frame: bytes | None) -> None:
        """Sends the announcements of new arenas and the releases queued so
        far, then ``frame`` (if any: it may refer to those arenas)."""
        if self._closed:
            raise TritonModelException(
                f"tritonpy: {self.names.model}: a forked child's BLS connection is closed "
                f"({self._closed})"
            )
        with self._release_lock:
            refs, self._releases = self._releases, []
        with self._send_lock:
            try:
                announcing = self._announcing
                while announcing:  # (appended by any thread: taken one by one)
                    arena_id, size, fd = announcing[0]
                    _send_fd(self.sock, C.encode_simple(C.ARENA, (arena_id, size)), fd)
                    del announcing[0]
                for f in C.encode_releases(C.BLS_RELEASE, refs):
                    self.sock.sendall(f)
                if frame is not None:
                    self.sock.sendall(frame)
            except OSError as e:
                self._lost(f"sending: {e}")
                raise TritonModelException(
                    f"tritonpy: {self.names.model}: a forked child's BLS connection is "
                    f"closed ({self._closed})"
                ) from None

    def _queue_release(self, ref: tuple[int, int]) -> None:
        # A lease made before another fork is its parent's to release.
        if os.getpid() != self._pid:
            return
        with self._release_lock:
            self._releases.append(ref)

    def flush_releases(self) -> None:
        if self._releases and not self._closed:
            try:
                self._send(None)
            except TritonModelException:
                pass

    # ---------------------------------------------------------------- calls

    def exec(self, request: Any, decoupled: bool) -> Any:
        call = Call(self, next(self._ids), decoupled)
        call.deadline = _bls_wire.deadline(request, _TIMEOUT_GRACE)
        frame = _bls_wire.request_frame(call.id, request, self.own)
        self._calls[call.id] = call
        try:
            self._send(frame)
        except TritonModelException:
            self._calls.pop(call.id, None)
            raise
        if decoupled:
            return _ITER(call)
        return self._wait_final(call)

    async def async_exec(self, request: Any, decoupled: bool) -> Any:
        # The wait runs on the child's own loop's executor: the child's
        # other coroutines go on meanwhile, their calls in flight together.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.exec, request, decoupled)

    def model_control(self, msg: dict[str, Any]) -> dict[str, Any]:
        call = self.control_call()
        frame = finish_frame(C.json_writer(C.MODEL_CONTROL, msg, call.id), self.own)
        self._calls[call.id] = call
        self._send(frame)
        return self.reply(call)

    def cancel(self, call: Call) -> None:
        if call.final or call.id == 0 or self._closed or os.getpid() != self._pid:
            return
        try:
            self._send(C.encode_simple(C.BLS_CANCEL, None, call.id))
        except TritonModelException:
            pass

    async def next_async(self, call: Call) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, self.next_sync, call)

    # ---------------------------------------------------------------- reading

    def _wait_sync(self, call: Call) -> None:
        if os.getpid() != self._pid:  # a call of the process that forked this one
            self._orphaned(call)
            return
        if call.deadline and time.monotonic() > call.deadline:
            self._time_out(call)
            return
        if not self._read_lock.acquire(timeout=_READ_WAIT):
            return  # another thread reads; it may be reading this answer
        try:
            if not (call.responses or call.final):
                self._read_one()
        finally:
            self._read_lock.release()

    def _read_one(self) -> None:
        """Reads and handles at most one frame (the read lock held)."""
        if self._closed:
            self.fail_all(self._closed)
            return
        self.flush_releases()
        if not _wait_for(self.sock, select.POLLIN, _READ_WAIT):
            return
        try:
            data, anc, _flags, _ = self.sock.recvmsg(C.MAX_FRAME, _FDS_SPACE)
        except OSError as e:
            self._lost(f"reading: {e}")
            return
        fds: list[int] = []
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(payload[: len(payload) - len(payload) % a.itemsize])
                fds.extend(a)
        if not data:
            for fd in fds:
                os.close(fd)
            self._lost("the server closed it")
            return
        try:
            self._handle(data, fds)
        except (C.ProtocolError, ValueError, KeyError) as e:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._lost(f"protocol error: {e}")

    def _handle(self, data: bytes, fds: list[int]) -> None:
        ftype, flags, fid, _body_len = C.decode_header(data)
        if flags & C.FLAG_BODY_IN_ARENA:
            raise C.ProtocolError(f"frame type {ftype} with its body in an arena")
        if ftype == C.BLS_ARENA:
            if len(fds) != 1:
                raise C.ProtocolError(f"BLS_ARENA with {len(fds)} descriptors")
            aid, size = C.decode_body(ftype, data, C.HEADER_SIZE)
            self.on_arena(aid, size, fds.pop())
            return
        if fds:
            raise C.ProtocolError(f"frame type {ftype} carried descriptors")
        body = C.decode_body(ftype, data, C.HEADER_SIZE)
        if ftype == C.BLS_RESPONSE:
            self.on_response(fid, body, data)
        elif ftype == C.RELEASE:
            for aid, off in body:
                self.own.free(aid, off)
        elif ftype == C.MODEL_CONTROL_DONE:
            self.on_control_done(fid, body)
        elif ftype == C.ERROR:
            self._lost(f"the backend reports: {body}")
        else:
            raise C.ProtocolError(f"frame type {ftype} is not sent to a forked child")

    def _lost(self, why: str) -> None:
        """The connection is gone: every waiter gets an error, and the next
        call connects again (BlsClient.lost)."""
        if not self._closed:
            self._closed = why
            self.lost = True
        self.fail_all(f"tritonpy: a forked child's BLS connection closed ({why})")


def install(client: BlsClient, host: PbHost) -> None:
    """Has every process forked from this one (and from those) make its
    own connection for ``client``'s calls, at its first call, and its own
    arenas for ``host`` (pb_utils.Tensor.empty) at once: the stub's arenas
    are shared memory whose free lists stay the parent's."""

    def after_fork() -> None:
        announcing: list[tuple[int, int, int]] = []
        own = OwnArenas(lambda aid, size, fd: announcing.append((aid, size, fd)))
        own.limit(*client.out.own.limits())
        host.arenas = own

        def connect(parent: BlsClient) -> BlsClient:
            return ForkedBls(parent.channel.sock, parent.names, own, announcing)

        client.after_fork_in_child(connect)

    os.register_at_fork(after_in_child=after_fork)
