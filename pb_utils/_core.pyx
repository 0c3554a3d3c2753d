# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
"""C fields for the objects every request makes: InferenceRequest, Tensor
and InferenceResponse.

``InferenceRequest`` (_request.py), ``Tensor`` (_tensor.py) and
``InferenceResponse`` (_response.py) are Python classes over
``RequestCore``, ``TensorCore`` and ``ResponseCore``, with no fields of
their own. What runs per request is here: ``request_from_stub`` and
``from_stub`` for what the stub decodes, ``Tensor(name, array)`` for an
ndarray of a native dtype, ``as_numpy``, ``get_input_tensor_by_name``,
``InferenceResponse(output_tensors=[...])`` and the accessors the stub
reads. Everything else (conversions, BYTES, BF16, DLPack, BLS, parameters,
the errors) stays in Python, reached through the ``bind_*`` functions.
(Python 3.11 reads and writes ``__slots__`` about as fast as Cython reads
a Python object's attributes: only C fields make this path cheaper; see
docs/performance.md.)
"""

from ._dtypes import ITEMSIZE, NATIVE_CODES, TYPE_BF16, TYPE_BYTES, WIRE_NAMES, WIRE_NUMPY
from ._errors import TritonModelException

import numpy as np

cdef object _ndarray = np.ndarray
cdef dict _native_codes = NATIVE_CODES
cdef dict _itemsize = ITEMSIZE
cdef int _TYPE_BYTES = TYPE_BYTES
cdef int _TYPE_BF16 = TYPE_BF16
cdef dict _wire_numpy = WIRE_NUMPY
cdef object _frombuffer = np.frombuffer
# Set once by bind_tensor, bind_response and bind_request, when _tensor.py,
# _response.py and _request.py are imported.
cdef object _tensor_cls = None
cdef object _general_init = None
cdef object _response_general_init = None
cdef object _request_cls = None
cdef object _default_memory = None
cdef object _no_trace = None


def bind_tensor(tensor_cls, general_init):
    """``Tensor(name, array)`` goes to ``general_init(self, name, array)``
    unless the fast path here takes it; ``from_stub`` makes ``tensor_cls``."""
    global _tensor_cls, _general_init
    _tensor_cls = tensor_cls
    _general_init = general_init


cdef class TensorCore:
    cdef public object _name
    cdef public object _dtype
    cdef public object _dims
    cdef public object _array
    cdef public object _buf
    cdef object __weakref__

    def __init__(self, name, numpy_array):
        cdef object code
        if type(name) is str and name and type(numpy_array) is _ndarray:
            code = _native_codes.get(numpy_array.dtype)
            if code is not None:  # the common case, in one lookup
                self._name = name
                self._dtype = code
                self._dims = numpy_array.shape
                self._array = numpy_array
                self._buf = None
                return
        _general_init(self, name, numpy_array)

    def name(self):
        return self._name

    def _small_wire_bytes(self, Py_ssize_t limit):
        """(dims, wire bytes) of a fixed-size array tensor of at most
        ``limit`` bytes, in one numpy copy; None for any other tensor (the
        stub then goes through ``_to_wire``)."""
        arr = self._array
        if self._buf is not None or arr is None or self._dtype == _TYPE_BYTES:
            return None
        if arr.nbytes > limit or arr.dtype.byteorder == ">":
            return None
        return arr.shape, arr.tobytes()

    def as_numpy(self):
        cdef object arr = self._array
        if arr is None:
            if self._dtype == _TYPE_BYTES or self._dtype == _TYPE_BF16:
                return (<object>self)._materialize()
            # A fixed-size wire tensor: a zero-copy view, made once.
            arr = _frombuffer(self._buf, dtype=_wire_numpy[self._dtype]).reshape(self._dims)
            self._array = arr
            return arr
        if self._dtype == _TYPE_BF16:
            raise (<object>self)._bf16_error()
        return arr


def bind_request(request_cls, default_memory, no_trace):
    """``request_from_stub`` makes ``request_cls`` with these defaults."""
    global _request_cls, _default_memory, _no_trace
    _request_cls = request_cls
    _default_memory = default_memory
    _no_trace = no_trace


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

    def __cinit__(self):
        # Per-request state, alike for requests from the stub and from BLS
        # code (object fields start as None).
        self._model_version = -1
        self._release_flags = 0
        self._done = False
        self._sent = 0
        self._cancelled = False
        self._index = 0

    def inputs(self):
        return self._inputs

    def request_id(self):
        return self._request_id


def request_from_stub(model_name, request_id, correlation_id, flags, timeout,
                      parameters, requested_output_names, inputs, batch=None,
                      int index=0):
    """A request as execute() sees it, built by the stub (no validation),
    ``index``-th of the stub's ``batch``."""
    cdef RequestCore r = RequestCore.__new__(_request_cls)
    r._model_name = model_name
    r._request_id = request_id
    r._correlation_id = correlation_id
    r._flags = flags
    r._timeout = timeout
    r._parameters = parameters or "{}"
    r._requested_output_names = requested_output_names
    r._inputs = inputs
    r._preferred_memory = _default_memory
    r._trace = _no_trace
    r._batch = batch
    r._index = index
    return r


def get_input_tensor_by_name(inference_request, name):
    """The request's input named ``name``, or None."""
    if isinstance(inference_request, RequestCore):
        for t in <list?>(<RequestCore>inference_request)._inputs:
            if (<TensorCore?>t)._name == name:
                return t
        return None
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def bind_response(general_init):
    """``InferenceResponse(...)`` goes to ``general_init(self, output_tensors,
    error, parameters)`` unless it is a plain list of tensors."""
    global _response_general_init
    _response_general_init = general_init


cdef class ResponseCore:
    cdef public object _output_tensors
    cdef public object _error
    cdef public object _parameters  # JSON text; "" for none

    def __init__(self, output_tensors=None, error=None, parameters=None):
        if type(output_tensors) is list and error is None and parameters is None:
            for t in <list>output_tensors:
                if not isinstance(t, TensorCore):
                    break
            else:
                self._output_tensors = list(output_tensors)
                self._error = None
                self._parameters = ""
                return
        _response_general_init(self, output_tensors, error, parameters)

    def output_tensors(self):
        return self._output_tensors

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def _parameters_json(self):
        return self._parameters


def from_stub(str name, int dtype, tuple dims, view):
    """A Tensor over wire bytes for the stub's frame decoder, which has
    already checked the name, the data type code, the dimensions (>= 0) and
    that ``view`` is a flat byte view: only the byte size is left."""
    cdef TensorCore t
    cdef object expected
    if dtype != _TYPE_BYTES:
        expected = _itemsize[dtype]
        for d in dims:
            expected = expected * d
        if view.nbytes != expected:
            raise TritonModelException(
                f"Tensor '{name}': {WIRE_NAMES[dtype]} shape {list(dims)} needs "
                f"{expected} bytes, got {view.nbytes}"
            )
    t = TensorCore.__new__(_tensor_cls)
    t._name = name
    t._dtype = dtype
    t._dims = dims
    t._buf = view
    t._array = None
    return t
