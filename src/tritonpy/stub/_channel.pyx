# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
"""The stub's end of the SOCK_SEQPACKET socket, driven by the event loop.

Reads go through ``loop.add_reader`` and one non-blocking ``recvmmsg`` per
readiness callback, which takes every message waiting, up to ``SLOTS``, into
preallocated slots (uvloop's stream transports are not meant for SEQPACKET:
see DESIGN.md). The messages are handed over in order, then ``on_drained``
runs if the receiver asked for it: what they produced (the answers of a
burst of sync batches) can leave in one frame. Writes are attempted
at once; what the kernel does not take is queued and flushed when the socket
is writable again, in order.

The socket calls are made here directly, not through Python's socket module
(whose argument parsing and result tuples cost more than the calls on the
per-request path). The socket stays non-blocking, so the GIL is held: no
call waits. (The GIL is also what makes the two ancillary-data buffers safe
to share between threads: a build without it would need a lock here.)
"""

import collections
import os
import select
import socket
import time

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc
from cpython.exc cimport PyErr_CheckSignals
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.errno cimport EAGAIN, EINTR, errno  # EWOULDBLOCK is EAGAIN on Linux
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from tritonpy.stub._engine cimport Engine
from tritonpy.stub._poll cimport POLLERR, POLLHUP, POLLIN, POLLOUT, poll, pollfd
from tritonpy.stub._wire cimport WIRE_MAX_FRAME

from tritonpy.stub import _codec

cdef extern from "<sys/socket.h>" nogil:
    ctypedef unsigned int socklen_t
    struct iovec:
        void* iov_base
        size_t iov_len
    struct msghdr:
        void* msg_name
        socklen_t msg_namelen
        iovec* msg_iov
        size_t msg_iovlen
        void* msg_control
        size_t msg_controllen
        int msg_flags
    struct cmsghdr:
        size_t cmsg_len
        int cmsg_level
        int cmsg_type
    struct mmsghdr:
        msghdr msg_hdr
        unsigned int msg_len
    int recvmmsg(int fd, mmsghdr* msgs, unsigned int vlen, int flags, void* timeout)
    ssize_t sendmsg(int fd, const msghdr* msg, int flags)
    ssize_t send(int fd, const void* buf, size_t n, int flags)
    cmsghdr* CMSG_FIRSTHDR(msghdr* msg)
    cmsghdr* CMSG_NXTHDR(msghdr* msg, cmsghdr* cmsg)
    unsigned char* CMSG_DATA(cmsghdr* cmsg)
    size_t CMSG_LEN(size_t n)
    size_t CMSG_SPACE(size_t n)
    int SOL_SOCKET
    int SCM_RIGHTS
    int MSG_TRUNC
    int MSG_CTRUNC
    int MSG_DONTWAIT
    int MSG_NOSIGNAL
    int MSG_CMSG_CLOEXEC

cdef extern from "Python.h":
    int PyBUF_WRITE

cdef extern from "<unistd.h>" nogil:
    int close(int fd)
    ssize_t read(int fd, void* buf, size_t n)

cdef extern from "<sched.h>" nogil:
    int sched_yield()

cdef enum:
    MAX_FDS = 16  # descriptors one message may carry (the backend sends one at most)
    # Words of ancillary data: 128 bytes, more than CMSG_SPACE(MAX_FDS * sizeof(int)).
    CONTROL_WORDS = 16
    # Messages one read takes. The backend sends a sync instance up to 16
    # batches ahead and refills at half: a read of up to 8 answers a burst
    # in one frame while the batches after it keep the stub busy.
    SLOTS = 8
# A slot holds one byte more than a frame may have, so an oversized message
# shows; rounded to whole pages.
cdef Py_ssize_t _SLOT = (WIRE_MAX_FRAME + 1 + 4095) & ~4095
cdef object _ProtocolError = _codec.ProtocolError


cdef class Channel:
    cdef public object sock
    cdef public bint closed
    cdef object _out  # (frame, fds) the kernel has not taken yet
    cdef bint _writing
    cdef int _fd
    cdef object _loop
    cdef object _receiver
    cdef Engine _engine  # the receiver, when it is the request path's core: called in C
    cdef object _on_eof
    cdef object _on_violation
    cdef bint _drained_wanted  # the receiver's drained() runs only when this is set
    cdef object _view  # of all the slots
    cdef char* _data  # SLOTS slots of _SLOT bytes, malloc'd: untouched until used
    cdef mmsghdr _msgs[SLOTS]
    cdef iovec _iovs[SLOTS]
    cdef unsigned int _count  # messages in the slots ...
    cdef unsigned int _next  # ... and the first one not yet handed over
    # Ancillary data of each read slot and of a write, aligned for cmsghdr.
    cdef size_t _recv_control[SLOTS][CONTROL_WORDS]
    cdef size_t _send_control[CONTROL_WORDS]

    def __init__(self, int fd, loop, on_eof, on_violation):
        """``on_eof(why)`` gets the end of the connection,
        ``on_violation(message)`` a message no frame can be (too long, too
        many descriptors). The receiver of the frames comes with start()."""
        cdef unsigned int i
        self.sock = socket.socket(fileno=fd)
        if self.sock.type != socket.SOCK_SEQPACKET:
            raise ValueError(f"fd {fd} is not a SOCK_SEQPACKET socket")
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, opt, 1 << 20)
            except OSError:
                pass
        self.sock.setblocking(False)
        if CMSG_SPACE(MAX_FDS * sizeof(int)) > sizeof(self._recv_control):
            raise SystemError("the ancillary data buffers are too small for this platform")
        self._fd = fd
        self._loop = loop
        self._on_eof = on_eof
        self._on_violation = on_violation
        self._data = <char*>PyMem_RawMalloc(SLOTS * _SLOT)
        if self._data == NULL:
            raise MemoryError()
        self._view = PyMemoryView_FromMemory(self._data, SLOTS * _SLOT, PyBUF_WRITE)
        self._count = self._next = 0
        memset(self._msgs, 0, sizeof(self._msgs))
        for i in range(SLOTS):
            self._iovs[i].iov_base = self._data + i * _SLOT
            self._iovs[i].iov_len = _SLOT
            self._msgs[i].msg_hdr.msg_iov = &self._iovs[i]
            self._msgs[i].msg_hdr.msg_iovlen = 1
            self._msgs[i].msg_hdr.msg_control = self._recv_control[i]
            self._msgs[i].msg_hdr.msg_controllen = CMSG_SPACE(MAX_FDS * sizeof(int))
        self._out = collections.deque()
        self._writing = False
        self.closed = False

    def start(self, receiver):
        """Start reading: ``receiver.on_frame(view, fds, more)`` gets each
        message (``more``: others of the same read follow) and answers
        whether ``receiver.drained()`` must run once every message of the
        read has been handed over. A view is valid until the next read: a
        receiver that keeps the bytes copies them. The stub's receiver is
        its Engine, which gets the bytes in C instead."""
        self._receiver = receiver
        if isinstance(receiver, Engine):
            self._engine = receiver
        self._loop.add_reader(self._fd, self.read_ready)

    def __dealloc__(self):
        # The view handed out last may outlive the channel only by mistake;
        # the memory goes with the channel.
        PyMem_RawFree(self._data)

    # -- reading

    def read_ready(self):
        """The socket is readable (the loop's reader; or a thread reading
        in turn, stub/turns.py): hand over what is waiting."""
        # The loop's readiness is level-triggered (libuv poll handles,
        # selectors): messages past the slots call again at once. A BLS
        # waiter reads through here too, from inside a handler: it hands
        # over the messages still in the slots first, in order, and reads
        # again only when they are all out.
        if self.closed:
            return
        if self._next >= self._count and not self._receive():
            return
        self._hand_over()

    cdef bint _receive(self) except -1:
        """Read what is waiting into the slots; False if nothing was."""
        cdef int n, err
        cdef unsigned int i
        for i in range(self._count):  # the slots the last read filled
            self._msgs[i].msg_hdr.msg_controllen = CMSG_SPACE(MAX_FDS * sizeof(int))
        n = recvmmsg(self._fd, self._msgs, SLOTS, MSG_DONTWAIT | MSG_CMSG_CLOEXEC, NULL)
        if n < 0:
            err = errno
            if err == EAGAIN or err == EINTR:
                return False
            self._eof(f"socket error: [Errno {err}] {os.strerror(err)}")
            return False
        self._count = n
        self._next = 0
        if n == 0:
            self._eof("the backend closed the socket")
            return False
        return True

    cdef _hand_over(self):
        cdef msghdr* msg
        cdef cmsghdr* c
        cdef int* data
        cdef size_t i, count, n
        cdef unsigned int k
        cdef list fds
        while self._next < self._count and not self.closed:
            k = self._next
            self._next += 1
            msg = &self._msgs[k].msg_hdr
            n = self._msgs[k].msg_len
            fds = []
            if msg.msg_controllen:
                c = CMSG_FIRSTHDR(msg)
                while c != NULL:
                    if c.cmsg_level == SOL_SOCKET and c.cmsg_type == SCM_RIGHTS:
                        data = <int*>CMSG_DATA(c)
                        count = (c.cmsg_len - CMSG_LEN(0)) // sizeof(int)
                        for i in range(count):
                            fds.append(data[i])
                    c = CMSG_NXTHDR(msg, c)
            if n == 0:
                # A zero-length message is how the peer's close reads.
                _close_all(fds)
                self._eof("the backend closed the socket")
                return
            if msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC) or <Py_ssize_t>n > WIRE_MAX_FRAME:
                _close_all(fds)
                self._on_violation(
                    f"protocol error: a message of more than {WIRE_MAX_FRAME} bytes "
                    "or with too many descriptors"
                )
                return
            try:
                if self._engine is not None:
                    wanted = self._engine.receive(
                        <const uint8_t*>self._iovs[k].iov_base, n, None, fds,
                        self._next < self._count)
                else:
                    wanted = self._receiver.on_frame(
                        self._view[k * _SLOT:k * _SLOT + n], fds, self._next < self._count)
                if wanted:
                    self._drained_wanted = True
            except BaseException:
                # Whatever escaped the handler, the rest of the read (and
                # the answers waiting for it) still go, on the next turn.
                self._loop.call_soon(self._resume)
                raise
        if self._drained_wanted and not self.closed:
            self._drained_wanted = False
            self._receiver.drained()

    def turn(self, int wake_fd, double timeout, long long spin_ns=0):
        """One wait of up to ``timeout`` seconds for the socket or
        ``wake_fd`` (an eventfd, read when it fires), without the GIL; then
        what waits to be written is written and what is readable handed
        over (the turn of a thread that reads while model code holds the
        loop thread: stub/turns.py). A closed channel waits for ``wake_fd``
        alone. With ``spin_ns``, the first ``spin_ns`` nanoseconds of the
        wait poll without sleeping, yielding the CPU to whatever else may
        run on it: a thread that sleeps on this machine is woken tens of
        microseconds after its frame is there (docs/bls.md). The spin is
        part of the wait: it ends with ``timeout`` at the latest, and the
        sleep after it lasts what is left of ``timeout``. True when
        something came during that spin."""
        cdef pollfd fds[2]
        cdef unsigned long count = 1
        cdef int n = 0
        cdef int ms = <int>(timeout * 1000)
        cdef long long wait_ns = <long long>(min(timeout, 1e9) * 1e9)  # (years: no overflow)
        cdef long long spent = 0
        cdef uint64_t value
        cdef short ev
        cdef timespec start, now
        cdef bint caught = False
        if timeout < 0:
            spin_ns = 0  # (a wait without end: no spin to bound it by)
        elif spin_ns > wait_ns:
            spin_ns = wait_ns
        fds[0].fd = wake_fd
        fds[0].events = POLLIN
        fds[0].revents = 0
        if not self.closed:
            fds[1].fd = self._fd
            fds[1].events = POLLIN | POLLOUT if self._out else POLLIN
            fds[1].revents = 0
            count = 2
        with nogil:
            if spin_ns > 0:
                clock_gettime(CLOCK_MONOTONIC, &start)
                while True:
                    n = poll(fds, count, 0)
                    if n != 0:
                        caught = n > 0
                        break
                    clock_gettime(CLOCK_MONOTONIC, &now)
                    spent = ((now.tv_sec - start.tv_sec) * 1000000000
                             + now.tv_nsec - start.tv_nsec)
                    if spent >= spin_ns:
                        break
                    sched_yield()
                # What is left of the wait, in the whole milliseconds poll(2) takes.
                if spent >= wait_ns:
                    ms = 0
                elif (wait_ns - spent) // 1000000 < ms:
                    ms = <int>((wait_ns - spent) // 1000000)
            if n == 0:
                n = poll(fds, count, ms)
        if n < 0:
            if errno == EINTR:
                PyErr_CheckSignals()  # a handler that raises ends the wait here
            return False
        if fds[0].revents:
            read(wake_fd, &value, sizeof(value))  # resets the eventfd (EAGAIN: nothing to reset)
        if count == 2:
            ev = fds[1].revents
            if ev & POLLOUT:
                self.write_ready()
            if ev & (POLLIN | POLLHUP | POLLERR):
                self.read_ready()
        return caught

    def _resume(self):
        if not self.closed:
            self._hand_over()

    cdef _eof(self, why):
        if not self.closed:
            self.close()
            self._on_eof(why)

    # -- writing

    cpdef send(self, frame, fds=()):
        cdef int err
        if self.closed:
            return
        if len(fds) > MAX_FDS:
            raise ValueError(f"at most {MAX_FDS} descriptors per frame, got {len(fds)}")
        if not self._out:
            err = self._sendmsg(frame, fds)
            if err == 0:
                return
            if err != EAGAIN and err != EINTR:
                self._eof(f"socket error: [Errno {err}] {os.strerror(err)}")
                return
        self._out.append((frame, fds))
        if not self._writing:
            self._writing = True
            self._loop.add_writer(self._fd, self.write_ready)

    cdef int _sendmsg(self, frame, fds) except -1:
        """0 when the kernel took the frame, else the errno."""
        cdef Py_buffer view
        cdef iovec iov
        cdef msghdr msg
        cdef cmsghdr* c
        cdef ssize_t n
        cdef int count = len(fds)  # at most MAX_FDS: checked by send()
        cdef int i
        cdef int err = 0
        PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
        try:
            if count == 0:
                n = send(self._fd, view.buf, view.len, MSG_DONTWAIT | MSG_NOSIGNAL)
            else:
                iov.iov_base = view.buf
                iov.iov_len = view.len
                memset(&msg, 0, sizeof(msg))
                msg.msg_iov = &iov
                msg.msg_iovlen = 1
                msg.msg_control = self._send_control
                msg.msg_controllen = CMSG_SPACE(count * sizeof(int))
                memset(self._send_control, 0, msg.msg_controllen)
                c = CMSG_FIRSTHDR(&msg)
                c.cmsg_level = SOL_SOCKET
                c.cmsg_type = SCM_RIGHTS
                c.cmsg_len = CMSG_LEN(count * sizeof(int))
                for i in range(count):
                    (<int*>CMSG_DATA(c))[i] = fds[i]
                n = sendmsg(self._fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL)
            if n < 0:
                err = errno
        finally:
            PyBuffer_Release(&view)
        return err

    @property
    def wants_write(self):
        """Frames the kernel has not taken yet wait for the socket to be
        writable."""
        return bool(self._out)

    def write_ready(self):
        """The socket is writable: send what is queued, in order."""
        cdef int err
        while self._out:
            frame, fds = self._out[0]
            err = self._sendmsg(frame, fds)
            if err == EAGAIN or err == EINTR:
                return
            if err:
                self._eof(f"socket error: [Errno {err}] {os.strerror(err)}")
                return
            self._out.popleft()
        self._loop.remove_writer(self._fd)
        self._writing = False

    def flush_blocking(self, double timeout=5.0):
        """Send everything queued, waiting for room as needed, for at most
        ``timeout`` seconds in all (used on the way out). Returns how many
        frames could not be sent (0: all went)."""
        cdef int err
        if self.closed:
            return len(self._out)
        poll = select.poll()
        poll.register(self._fd, select.POLLOUT)
        deadline = time.monotonic() + timeout
        while self._out:
            frame, fds = self._out[0]
            err = self._sendmsg(frame, fds)
            if err == EAGAIN or err == EINTR:
                left = deadline - time.monotonic()
                if left > 0 and poll.poll(left * 1000):
                    continue
                break
            if err:
                break
            self._out.popleft()
        return len(self._out)

    def close(self):
        if self.closed:
            return
        self.closed = True
        fd = self.sock.fileno()
        if fd >= 0:
            self._loop.remove_reader(fd)
            if self._writing:
                self._loop.remove_writer(fd)
        self.sock.close()


cdef _close_all(list fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
