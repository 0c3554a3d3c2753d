# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# The limits and header layout of the IPC protocol (docs/protocol.md) as C
# constants, generated from docs/protocol.toml by tools/gen_wire.py (make wire):
# do not edit. Cimported by the compiled stub modules; Python code reads the
# same values from _codec (_wire.pxi).

cdef enum:
    WIRE_HEADER_SIZE = 24
    WIRE_MAX_FRAME = 131072
    WIRE_ARENA_REF_SIZE = 16
    WIRE_INLINE_LIMIT = 65536
    WIRE_MAX_NDIM = 64
    WIRE_MAX_COUNT = 1048576
    WIRE_MAX_BACKEND_TEXT = 32768
    # The header's fields, at these offsets (all little-endian).
    WIRE_HEADER_MAGIC_OFFSET = 0  # u32
    WIRE_HEADER_VERSION_OFFSET = 4  # u8
    WIRE_HEADER_TYPE_OFFSET = 5  # u8
    WIRE_HEADER_FLAGS_OFFSET = 6  # u16
    WIRE_HEADER_ID_OFFSET = 8  # u64
    WIRE_HEADER_BODY_LEN_OFFSET = 16  # u32
    WIRE_HEADER_RESERVED_OFFSET = 20  # u32
