# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
# The C fields of _core.pyx's types, for the stub's compiled modules
# (stub/_batch.pyx) to read and write without attribute lookups.

cdef class TensorCore:
    cdef public object _name
    cdef public object _dtype
    cdef public object _dims
    cdef public object _array
    cdef public object _buf
    cdef object __weakref__


cdef class RequestCore:
    cdef public object _model_name
    cdef public object _model_version
    cdef public object _request_id
    cdef public object _correlation_id
    cdef public object _flags
    cdef public object _timeout
    cdef public object _parameters
    cdef public object _requested_output_names
    cdef public object _inputs
    cdef public object _preferred_memory
    cdef public object _trace
    cdef public object _release_flags
    cdef public object _sender  # made by get_response_sender()
    cdef public object _done  # the final flag went out (or the batch ended)
    cdef public object _sent  # responses sent through the sender
    cdef public object _send_error  # the backend could not deliver a response
    cdef public object _cancelled
    cdef public object _cancel_callbacks
    cdef public object _batch  # the stub's batch of a request given to execute()
    cdef public object _index


cdef class ResponseCore:
    cdef public object _output_tensors
    cdef public object _error
    cdef public object _parameters  # JSON text; "" for none


cdef class SenderCore:
    cdef public object _request
    cdef object __weakref__
