# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
# poll(2), for the compiled stub modules that wait on descriptors without
# the GIL (_channel.pyx, _lifetime.pyx).

cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd* fds, unsigned long nfds, int timeout)
    enum:
        POLLIN
        POLLOUT
        POLLERR
        POLLHUP
        POLLNVAL
