# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
# What the request path's core (_engine.pyx) calls in _batch.pyx, in C: a
# batch, how it is built from a decoded EXECUTE body, and how its answers
# become RESPONSES entries and frames.

from tritonpy.pb_utils._seam cimport RequestCore

from tritonpy.stub._codec cimport Entry


cdef class Batch:
    cdef public object id
    cdef public object requests
    cdef public object given
    cdef public object rejected
    cdef public object buf
    cdef public object task
    cdef public bint returned
    cdef public object arena_inputs

    cdef Py_ssize_t open_count(self)


# What Outbox.send answers, as bits.
cdef enum:
    SENT_SCHEDULE = 1  # the caller must schedule a flush
    SENT_DONE = 2  # the request's batch is over


cdef class Outbox:
    cdef list pending
    cdef bint scheduled

    cdef bint _schedule(self)
    cpdef bint put(self, entries) except -1
    cpdef list take(self)
    cdef bint has_pending(self)
    cpdef int send(self, RequestCore req, response, int flags, own, model_name) except -1


cpdef Batch make_batch(batch_id, list wire, buf, peer, model_name)
cpdef str check_result(result, Py_ssize_t n, Batch batch)
cpdef object answer(Batch batch, result, writer, own, model_name, str instance=*)
cpdef Entry entry(RequestCore req, resp, unsigned int flags, Py_ssize_t frame_size, own,
                  model_name)
cpdef Py_ssize_t write_entries(writer, list entries, Py_ssize_t start) except -1
