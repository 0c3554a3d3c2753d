# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub's end of the SOCK_SEQPACKET socket, driven by the event loop.

Reads go through ``loop.add_reader`` and non-blocking ``recvmsg_into`` into
one preallocated buffer, one message per readiness callback (uvloop's stream
transports are not meant for SEQPACKET: see DESIGN.md). Writes are attempted at once; what the kernel does
not take is queued and flushed when the socket is writable again, in order.
"""

from __future__ import annotations

import array
import asyncio
import collections
import os
import socket
from collections.abc import Callable, Sequence

from tritonpy.stub import _codec

_CMSG_SPACE = socket.CMSG_SPACE(16 * array.array("i").itemsize)
_RECV_FLAGS = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
# A plain int: socket.MSG_* are enum flags, slow to combine per message.
_BAD_FLAGS = int(socket.MSG_TRUNC | socket.MSG_CTRUNC)


class Channel:
    def __init__(
        self,
        fd: int,
        loop: asyncio.AbstractEventLoop,
        on_frame: Callable[[memoryview, list[int]], None],
        on_eof: Callable[[str], None],
    ) -> None:
        self.sock = socket.socket(fileno=fd)
        if self.sock.type != socket.SOCK_SEQPACKET:
            raise ValueError(f"fd {fd} is not a SOCK_SEQPACKET socket")
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, opt, 1 << 20)
            except OSError:
                pass
        self.sock.setblocking(False)
        self._loop = loop
        self._on_frame = on_frame
        self._on_eof = on_eof
        # One byte more than a frame may have, so an oversized message shows.
        self._buf = bytearray(_codec.MAX_FRAME + 1)
        self._view = memoryview(self._buf)
        self._out: collections.deque[tuple[bytes, Sequence[int]]] = collections.deque()
        self._writing = False
        self.closed = False

    def start(self) -> None:
        self._loop.add_reader(self.sock.fileno(), self._readable)

    # -- reading

    def _readable(self) -> None:
        # One message per call: the loop's readiness is level-triggered
        # (libuv poll handles, selectors), so a socket with more messages
        # calls again at once, and the usual single message costs no
        # recvmsg that ends in EAGAIN.
        if self.closed:
            return
        try:
            n, anc, flags, _ = self.sock.recvmsg_into([self._buf], _CMSG_SPACE, _RECV_FLAGS)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._eof(f"socket error: {e}")
            return
        fds: list[int] = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(data[: len(data) - len(data) % a.itemsize])
                fds.extend(a)
        if n == 0:
            _close_all(fds)
            self._eof("the backend closed the socket")
            return
        if flags & _BAD_FLAGS or n > _codec.MAX_FRAME:
            _close_all(fds)
            raise _codec.ProtocolError(
                f"a message of more than {_codec.MAX_FRAME} bytes or with too many descriptors"
            )
        self._on_frame(self._view[:n], fds)

    def _eof(self, why: str) -> None:
        if not self.closed:
            self.close()
            self._on_eof(why)

    # -- writing

    def send(self, frame: bytes, fds: Sequence[int] = ()) -> None:
        if self.closed:
            return
        if not self._out:
            try:
                self._sendmsg(frame, fds)
                return
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                self._eof(f"socket error: {e}")
                return
        self._out.append((frame, fds))
        if not self._writing:
            self._writing = True
            self._loop.add_writer(self.sock.fileno(), self._writable)

    def _sendmsg(self, frame: bytes, fds: Sequence[int]) -> None:
        if fds:
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
            self.sock.sendmsg([frame], anc)
        else:
            self.sock.send(frame)

    def _writable(self) -> None:
        while self._out:
            frame, fds = self._out[0]
            try:
                self._sendmsg(frame, fds)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._eof(f"socket error: {e}")
                return
            self._out.popleft()
        self._loop.remove_writer(self.sock.fileno())
        self._writing = False

    def flush_blocking(self) -> None:
        """Send everything queued, waiting as needed (used on the way out)."""
        if self.closed:
            return
        self.sock.setblocking(True)
        try:
            while self._out:
                frame, fds = self._out.popleft()
                self._sendmsg(frame, fds)
        finally:
            self.sock.setblocking(False)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        fd = self.sock.fileno()
        if fd >= 0:
            self._loop.remove_reader(fd)
            if self._writing:
                self._loop.remove_writer(fd)
        self.sock.close()


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
