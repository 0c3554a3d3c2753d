# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
# What the stub's compiled modules (stub/_batch.pyx, stub/_bls_wire.pyx,
# stub/_engine.pyx) cimport from pb_utils: the C types of requests, tensors
# and responses, whose fields they read and write directly, and the base of
# where response senders send (declared in _core.pxd).

from tritonpy.pb_utils._core cimport (
    RequestCore,
    ResponseCore,
    ResponsesCore,
    SenderCore,
    TensorCore,
    close_request,
    dtype_wire_size,
    wire_parts,
)
