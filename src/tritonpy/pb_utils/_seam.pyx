# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
"""The one module of pb_utils the stub imports (tests/unit/test_host_seam.py
holds it to that).

pb_utils runs anywhere; what needs a server it asks of the host the stub
registers here, once, before any model code runs (``register``, from
_host.py, which declares the host's parts and keeps it). The rest is what
the stub needs of the model API: the public module itself (served to
models under the official names), the names it builds requests, tensors
and responses from, and what it does to a request or response after a
model has it. Models can read a request's or response's fields but not
assign them (_core.pxd); the stub's writes go through the functions here,
and its compiled modules cimport the C types through _seam.pxd.
"""

from tritonpy import pb_utils
from tritonpy.pb_utils import TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
from tritonpy.pb_utils import _c_utils as c_utils
from tritonpy.pb_utils._dtypes import ITEMSIZE, TYPE_BYTES, WIRE_NAMES
from tritonpy.pb_utils._errors import (
    SEND_SECOND_RESPONSE,
    TritonError,
    TritonModelException,
    execute_failed,
)
from tritonpy.pb_utils._host import Arenas, Bls, Host, Metrics, Responses, register
from tritonpy.pb_utils._model_config import ModelConfig
from tritonpy.pb_utils._request import DEFAULT_MEMORY, InferenceRequest
from tritonpy.pb_utils._response import InferenceResponse
from tritonpy.pb_utils._tensor import Tensor

__all__ = [
    "pb_utils",
    "c_utils",
    "register",
    "Host",
    "Responses",
    "Bls",
    "Metrics",
    "Arenas",
    "InferenceRequest",
    "InferenceResponse",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "ModelConfig",
    "DEFAULT_MEMORY",
    "ITEMSIZE",
    "TYPE_BYTES",
    "WIRE_NAMES",
    "SEND_SECOND_RESPONSE",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "execute_failed",
    "close",
    "is_closed",
    "batch_of",
    "rescheduled",
    "set_cancelled",
    "cancel",
    "send_failed",
    "model_name",
    "set_parameters_json",
]

cdef int _RELEASE_RESCHEDULE = TRITONSERVER_REQUEST_RELEASE_RESCHEDULE


# register(host): the stub's host (a _host.Host) serves pb_utils from now
# on: response senders, BLS, metrics, shared memory, the log, the model
# directory. Once per process; RuntimeError on a second call.


# ------------------------------------------------------------------ requests
# What the stub's Python modules do to a request or response by name: they
# read and write none of their fields.


def close(RequestCore request not None):
    """Mark ``request`` complete (its final response or error is on its
    way); False if it already was. See close_request in _core.pxd."""
    return close_request(request)


def is_closed(RequestCore request not None):
    return request._done


def batch_of(RequestCore request not None):
    """The stub's batch of a request given to execute() (None for others)."""
    return request._batch


def rescheduled(RequestCore request not None):
    """The model asked Triton to run ``request`` again (set_release_flags)."""
    return bool(request._release_flags & _RELEASE_RESCHEDULE)


def set_cancelled(RequestCore request not None):
    """Triton cancelled ``request``: the flag alone, from any thread
    (is_cancelled() sees it at once); ``cancel`` follows on the loop."""
    request._cancelled = True


def cancel(RequestCore request not None):
    """Triton cancelled ``request``: the flag, and the callbacks the model
    added run (on the stub's loop)."""
    request._cancelled = True
    callbacks, request._cancel_callbacks = request._cancel_callbacks, None
    for cb in callbacks or ():
        cb(request)


def send_failed(RequestCore request not None, str message):
    """The backend could not deliver a response of ``request``: its next
    send() raises ``message``."""
    request._send_error = message


def model_name(RequestCore request not None):
    """The model a BLS ``request`` is for."""
    return request._model_name


def set_parameters_json(ResponseCore response not None, str parameters):
    """Parameters that arrived as JSON text (a BLS response)."""
    response._parameters = parameters
