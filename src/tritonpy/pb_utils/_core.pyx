# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
"""C fields for the objects every request makes: InferenceRequest, Tensor
and InferenceResponse.

``InferenceRequest`` (_request.py), ``Tensor`` (_tensor.py) and
``InferenceResponse`` (_response.py) are Python classes over
``RequestCore``, ``TensorCore`` and ``ResponseCore``, with no fields of
their own. The fields are declared in _core.pxd, so that the stub's
compiled modules read them as C fields (stub/_batch.pyx builds the
requests and tensors of a batch there, and encodes its answers). What runs
per request in a model is here: ``Tensor(name, array)`` for an ndarray of a
native dtype, ``as_numpy``, ``get_input_tensor_by_name``,
``get_output_tensor_by_name`` (a BLS model reads its calls' outputs with
it), ``InferenceResponse(output_tensors=[...])`` and the accessors. Everything
else (conversions, BYTES, BF16, DLPack, BLS, parameters, the errors) stays
in the Python subclasses, reached as their methods (``_init_general``,
``_materialize``). (Python 3.11 reads and writes ``__slots__`` about as
fast as Cython reads a Python object's attributes: only C fields make this
path cheaper; see docs/performance.md.)

The fields are ``readonly`` to Python: a model that assigns one gets an
AttributeError. The official API's setters (``set_flags``,
``set_release_flags``) are methods here; pb_utils' Python modules fill
their objects through the ``init_*``/``keep_*`` functions below; the stub
goes through the seam (_seam.pyx), the one module of pb_utils it imports.
"""

from . import _host as _hosts
from ._dtypes import ITEMSIZE, NATIVE_CODES, TYPE_BF16, TYPE_BYTES, WIRE_NUMPY
from ._errors import (
    SEND_BAD_FLAGS,
    SEND_CLOSED,
    SEND_FINAL_FIRST,
    SEND_NEEDS_RESPONSE,
    SEND_SECOND_RESPONSE,
    TritonModelException,
)

import numpy as np

cdef object _ndarray = np.ndarray
cdef dict _native_codes = NATIVE_CODES
# (dtype, code) of the last native-dtype array a Tensor was made of.
cdef tuple _last_dtype = (None, None)
cdef int _TYPE_BYTES = TYPE_BYTES
cdef int _TYPE_BF16 = TYPE_BF16
cdef dict _wire_numpy = WIRE_NUMPY
cdef int _FINAL = 1  # TRITONSERVER_RESPONSE_COMPLETE_FINAL
cdef int _RELEASE_RESCHEDULE = 2  # TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
# ITEMSIZE as a C table (0: no fixed size, or no such type).
cdef Py_ssize_t _itemsize_c[16]
for _code in range(16):
    _itemsize_c[_code] = ITEMSIZE.get(_code, 0)


cdef class TensorCore:

    def __init__(self, name, numpy_array):
        """The fast path of ``Tensor(name, array)``; the subclass's
        ``_init_general`` takes everything else."""
        global _last_dtype
        cdef object code
        cdef tuple last
        if type(name) is str and name and type(numpy_array) is _ndarray:
            dt = numpy_array.dtype
            last = _last_dtype
            if last[0] is dt:
                # The dtype of the tensor made last: numpy's built-in dtypes
                # are one object each, so a model's outputs mostly hit.
                code = last[1]
            else:
                code = _native_codes.get(dt)
                if code is not None:
                    _last_dtype = (dt, code)  # one tuple: atomic for threads
            if code is not None:  # the common case, in one lookup
                self._name = name
                self._dtype = code
                self._dims = numpy_array.shape
                self._array = numpy_array
                self._buf = None
                return
        (<object>self)._init_general(name, numpy_array)

    def name(self):
        return self._name

    def as_numpy(self):
        cdef object arr = self._array
        if arr is None:
            if self._dtype == _TYPE_BYTES or self._dtype == _TYPE_BF16:
                return (<object>self)._materialize()
            # A fixed-size wire tensor: a zero-copy view, made once, in one
            # call (the ndarray constructor over the buffer: read-only if
            # the buffer is; its byte size was checked against the dims
            # when the frame was decoded).
            arr = _ndarray(self._dims, _wire_numpy[self._dtype], self._buf)
            self._array = arr
            return arr
        if self._dtype == _TYPE_BF16:
            raise (<object>self)._bf16_error()
        return arr


cdef class RequestCore:

    def __cinit__(self):
        # Per-request state, alike for requests from the stub and from BLS
        # code (object fields start as None).
        self._model_version = -1
        self._release_flags = 0
        self._sent = 0
        self._cancelled = False
        self._index = 0

    def inputs(self):
        return self._inputs

    def request_id(self):
        return self._request_id

    def set_flags(self, flags):
        """The flags a BLS request is sent with (TRITONSERVER_REQUEST_FLAG_*)."""
        self._flags = int(flags)

    def set_release_flags(self, flags):
        """TRITONSERVER_REQUEST_RELEASE_RESCHEDULE asks Triton to execute
        this request again (iterative sequence batching)."""
        self._release_flags = int(flags)


cdef object _named(tensors, name):
    """The tensor named ``name`` in ``tensors``, or None: C fields read for
    a list of TensorCore, ``name()`` called otherwise."""
    if type(tensors) is list:
        for t in <list>tensors:
            if isinstance(t, TensorCore):
                if (<TensorCore>t)._name == name:
                    return t
            elif t.name() == name:
                return t
        return None
    for t in tensors:
        if t.name() == name:
            return t
    return None


def get_input_tensor_by_name(inference_request, name):
    """The request's input named ``name``, or None."""
    if isinstance(inference_request, RequestCore):
        return _named((<RequestCore>inference_request)._inputs, name)
    return _named(inference_request.inputs(), name)


def get_output_tensor_by_name(inference_response, name):
    """The response's output named ``name``, or None."""
    if isinstance(inference_response, ResponseCore):
        return _named((<ResponseCore>inference_response)._output_tensors, name)
    return _named(inference_response.output_tensors(), name)


# output_tensors left out (an explicit None is refused, as officially).
NO_OUTPUTS = ()


cdef class ResponseCore:

    def __init__(self, output_tensors=NO_OUTPUTS, error=None, parameters=None):
        """The fast path of ``InferenceResponse([tensors])``; the subclass's
        ``_init_general`` takes everything else."""
        if type(output_tensors) is list and error is None and parameters is None:
            for t in <list>output_tensors:
                if not isinstance(t, TensorCore):
                    break
            else:
                self._output_tensors = list(output_tensors)
                self._error = None
                self._parameters = ""
                return
        (<object>self)._init_general(output_tensors, error, parameters)

    def output_tensors(self):
        return self._output_tensors

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def _parameters_json(self):
        return self._parameters


cdef class ResponsesCore:
    """The stub's engine derives from it: a sender calls send_response in
    C (its fields: _core.pxd)."""

    cdef send_response(self, RequestCore req, response, int flags):
        raise NotImplementedError("ResponsesCore.send_response")


cdef class SenderCore:
    """InferenceResponseSender's field and its send(), compiled: a
    streaming model calls send() once per token."""

    def send(self, response=None, flags=0):
        """Send ``response``, and/or end the request with
        ``flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL``.

        Raises TritonModelException after the final flag has been sent, or
        when the backend reported that an earlier response of this request
        could not be delivered. In default (non-decoupled) mode a request
        takes one response, with the final flag or followed by it: a second
        response, or the final flag before any response, raises and ends the
        request with that error."""
        cdef RequestCore req = self._request
        cdef ResponsesCore core = None
        if req is None:
            raise TypeError("response senders come from request.get_response_sender()")
        if flags != 0 and flags != _FINAL:
            raise TritonModelException(SEND_BAD_FLAGS)
        if response is None:
            if flags == 0:
                raise TritonModelException(SEND_NEEDS_RESPONSE)
        elif not isinstance(response, ResponseCore):
            raise TritonModelException(
                f"send() takes a pb_utils.InferenceResponse, got {type(response).__name__}"
            )
        responses = self._responses
        if responses is None:
            raise TritonModelException("response senders need a running tritonpy stub")
        if isinstance(responses, ResponsesCore):
            core = <ResponsesCore>responses
        if not (core.decoupled if core is not None else responses.decoupled):
            # The official backend checks these before the closed state.
            if response is not None and (req._sent or req._done):
                responses.broke_rule(req, SEND_SECOND_RESPONSE)
            if response is None and not req._sent and not req._done:
                responses.broke_rule(req, SEND_FINAL_FIRST)
        if req._done:
            raise TritonModelException(SEND_CLOSED)
        error = req._send_error
        if error is not None:
            req._send_error = None
            raise TritonModelException(error)
        if flags == _FINAL:
            close_request(req)
        if response is not None:
            req._sent += 1
        if core is not None:
            core.send_response(req, response, flags)
        else:
            responses.send(req, response, flags)


# ------------------------------------------------------------------ for pb_utils
# How pb_utils' Python modules (_request.py, _tensor.py, _response.py,
# _sender.py) fill the fields Python code can only read.


cdef object _INT64_MIN = -(2**63)
cdef object _INT64_MAX = 2**63 - 1
cdef object _UINT32_MAX = 2**32 - 1
cdef object _UINT64_MAX = 2**64 - 1


def init_request(
    RequestCore r not None,
    model_name,
    model_version,
    request_id,
    correlation_id,
    flags,
    timeout,
    parameters,
    requested_output_names,
    inputs,
    preferred_memory,
    trace,
    bint plain=False,
):
    """The fields of a request a model builds (BLS), checked by the caller.

    With ``plain``, the arguments are ``InferenceRequest(...)``'s as given,
    checked here (it runs per BLS call) when they are what BLS code mostly
    passes: str names, an int or str correlation id, ints in their ranges,
    lists of str and of tensors, no parameters. False, with nothing
    filled, for anything else: _request.py then converts or refuses it."""
    if plain:
        if not (
            type(model_name) is str
            and type(request_id) is str
            and (type(correlation_id) is int or type(correlation_id) is str)
            and type(model_version) is int
            and type(flags) is int
            and type(timeout) is int
            and type(requested_output_names) is list
            and type(inputs) is list
            and parameters is None
            and preferred_memory is not None
            and trace is not None
        ):
            return False
        if not (
            _INT64_MIN <= model_version <= _INT64_MAX
            and 0 <= flags <= _UINT32_MAX
            and 0 <= timeout <= _UINT64_MAX
        ):
            return False
        for n in <list>requested_output_names:
            if type(n) is not str:
                return False
        for t in <list>inputs:
            if not isinstance(t, TensorCore):
                return False
        parameters = "{}"
        requested_output_names = list(requested_output_names)
        inputs = list(inputs)
    r._model_name = model_name
    r._model_version = model_version
    r._request_id = request_id
    r._correlation_id = correlation_id
    r._flags = flags
    r._timeout = timeout
    r._parameters = parameters
    r._requested_output_names = requested_output_names
    r._inputs = inputs
    r._preferred_memory = preferred_memory
    r._trace = trace
    return True


def keep_trace(RequestCore r not None, trace):
    """The InferenceTrace made on first use of a request's trace()."""
    r._trace = trace


def keep_sender(RequestCore r not None, sender):
    """The response sender made on first use of get_response_sender()."""
    r._sender = sender


def cancel_callbacks(RequestCore r not None):
    """The list add_cancel_callback() appends to, made on first use."""
    if r._cancel_callbacks is None:
        r._cancel_callbacks = []
    return r._cancel_callbacks


def init_tensor(TensorCore t not None, name, int dtype, tuple dims, array, buf):
    """All the fields of a tensor: ``array`` (or None: made from ``buf`` on
    first use), ``buf`` (wire bytes, or None)."""
    t._name = name
    t._dtype = dtype
    t._dims = dims
    t._array = array
    t._buf = buf


def keep_array(TensorCore t not None, array):
    """The array a tensor's wire bytes were decoded or viewed as."""
    t._array = array


def init_response(ResponseCore r not None, list output_tensors, error, str parameters):
    """All the fields of a response (``parameters``: JSON text, "" for none)."""
    r._output_tensors = output_tensors
    r._error = error
    r._parameters = parameters


def init_sender(SenderCore s not None, request):
    """The request a new response sender answers, and where it sends: the
    host's ``responses``, looked up once here rather than per send()."""
    s._request = request
    host = _hosts._host
    s._responses = None if host is None else host.responses


cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX


cdef Py_ssize_t dtype_wire_size(int dtype, tuple dims):
    """Bytes of a tensor of the fixed-size wire type ``dtype`` and shape
    ``dims`` (each >= 0); -1 for no such type, or when that is more than
    any buffer can hold."""
    if dtype < 1 or dtype >= 16 or _itemsize_c[dtype] == 0:
        return -1
    cdef Py_ssize_t size = _itemsize_c[dtype]
    cdef Py_ssize_t d
    for d in dims:
        if d == 0:
            return 0
        if size > PY_SSIZE_T_MAX // d:
            size = -1  # no buffer is that large, unless a later dimension is 0
        elif size >= 0:
            size *= d
    return size
