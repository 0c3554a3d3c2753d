# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
# The C fields of _core.pyx's types. Python code (a model, and pb_utils'
# own Python modules) may read them but not write them: ``readonly``. C
# code reads and writes them directly: _core.pyx, and the stub's compiled
# modules, which cimport them through the seam (_seam.pxd).

cdef class TensorCore:
    cdef readonly object _name
    cdef readonly object _dtype
    cdef readonly object _dims
    cdef readonly object _array
    cdef readonly object _buf
    cdef object __weakref__


cdef class RequestCore:
    cdef readonly object _model_name
    cdef readonly object _model_version
    cdef readonly object _request_id
    cdef readonly object _correlation_id
    cdef readonly object _flags
    cdef readonly object _timeout
    cdef readonly object _parameters
    cdef readonly object _requested_output_names
    cdef readonly object _inputs
    cdef readonly object _preferred_memory
    cdef readonly object _trace
    cdef readonly object _release_flags
    cdef readonly object _sender  # made by get_response_sender()
    # Complete: its final response (or error) is on its way. Set only by
    # close_request; a batch is over when all its requests are complete.
    cdef readonly bint _done
    cdef readonly object _sent  # responses sent through the sender
    cdef readonly object _send_error  # the backend could not deliver a response
    cdef readonly object _cancelled
    cdef readonly object _cancel_callbacks
    cdef readonly object _batch  # the stub's batch of a request given to execute()
    cdef readonly object _index


cdef class ResponseCore:
    cdef readonly object _output_tensors
    cdef readonly object _error
    cdef readonly object _parameters  # JSON text; "" for none


cdef class ResponsesCore:
    """Where response senders send, in C: the stub's engine derives from
    it (stub/_engine.pyx), so that send() reaches it without a Python
    call. A host's ``responses`` of another kind is called by name."""
    cdef public bint decoupled  # the model's transaction policy, known from INIT on

    # Queue ``response`` (or None) of ``req`` with ``flags``; the sender
    # has checked both and closed the request on the final flag.
    cdef send_response(self, RequestCore req, response, int flags)


cdef class SenderCore:
    cdef readonly object _request
    # Where send() sends: the registered host's ``responses`` when the
    # sender was made (None outside a stub).
    cdef readonly object _responses
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

