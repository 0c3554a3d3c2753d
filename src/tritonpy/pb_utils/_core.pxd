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
    # Complete: its final response (or error) is on its way. Set only by
    # close_request; a batch is over when all its requests are complete.
    cdef public bint _done
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


cdef enum:
    WIRE_TYPE_BYTES = 13  # pb_utils._dtypes.TYPE_BYTES


cdef inline tuple wire_parts(TensorCore t):
    """``t._to_wire()``: (name, dtype code, dims, buffer of the wire bytes).
    Wire bytes a model left as they came (an input passed on, a BLS
    output returned) without the Python call."""
    if t._buf is not None and (t._array is None or t._dtype != WIRE_TYPE_BYTES):
        return (t._name, t._dtype, t._dims, t._buf)
    return t._to_wire()


# Bytes of a fixed-size tensor of a wire type code and shape (_core.pyx);
# -1 for no such type or more than any buffer holds.
cdef Py_ssize_t dtype_wire_size(int dtype, tuple dims)


cdef inline bint close_request(RequestCore request):
    """Mark ``request`` complete; False if it already was. The one place a
    request becomes complete, whoever ends it (its sender's final flag, the
    stub's answers, errors and cancellations): no Python code runs between
    the test and the set, so under the GIL it is atomic for every thread."""
    if request._done:
        return False
    request._done = True
    return True
