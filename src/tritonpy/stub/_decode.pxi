# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# The reading half of the frame codec, included by _codec.pyx (one module:
# the reader shares its constants and C helpers). Every length, count and
# offset is checked against the end of the frame before it is used.

# ------------------------------------------------------------------ records
# Fields: _codec.pxd. Their values never hold a reference back to a record
# (text, numbers, tuples of those and of records), so they cannot form a
# cycle: the collector does not track them.


@cython.freelist(16)
@cython.no_gc
cdef class WireTensor:
    pass


@cython.freelist(16)
@cython.no_gc
cdef class WireRequest:
    pass


@cython.no_gc
cdef class BlsRequest:
    pass


@cython.freelist(16)
@cython.no_gc
cdef class WireResponse:
    pass


@cython.no_gc
cdef class MetricOp:
    pass


cdef inline MetricOp _metric_op(uint8_t op, uint32_t metric):
    cdef MetricOp m = MetricOp.__new__(MetricOp)
    m.op = op
    m.metric = metric
    m.name = m.description = ""
    m.labels = m.values = ()
    return m


# ------------------------------------------------------------------ reading


# Final (its reads are direct calls, the bounds check inlined), and one
# is made per frame read.
@cython.final
@cython.freelist(4)
cdef class _Reader:
    cdef const uint8_t* p
    cdef Py_ssize_t pos
    cdef Py_ssize_t end

    cdef inline int need(self, Py_ssize_t n) except -1:
        if n < 0 or n > self.end - self.pos:
            self.truncated(n)
        return 0

    cdef int truncated(self, Py_ssize_t n) except -1:
        raise ProtocolError(
            f"truncated frame: {n} bytes needed at offset {self.pos}, "
            f"the frame ends at {self.end}")

    cdef uint8_t u8(self) except? 0xFF:
        self.need(WIRE_U8_SIZE)
        cdef uint8_t v = self.p[self.pos]
        self.pos += WIRE_U8_SIZE
        return v

    cdef uint32_t u32(self) except? 0xFFFFFFFF:
        cdef uint32_t v
        self.need(WIRE_U32_SIZE)
        memcpy(&v, self.p + self.pos, WIRE_U32_SIZE)
        self.pos += WIRE_U32_SIZE
        return v

    cdef uint64_t u64(self) except? 0xFFFFFFFFFFFFFFFF:
        cdef uint64_t v
        self.need(WIRE_U64_SIZE)
        memcpy(&v, self.p + self.pos, WIRE_U64_SIZE)
        self.pos += WIRE_U64_SIZE
        return v

    cdef int64_t i64(self) except? -1:
        cdef int64_t v
        self.need(WIRE_I64_SIZE)
        memcpy(&v, self.p + self.pos, WIRE_I64_SIZE)
        self.pos += WIRE_I64_SIZE
        return v

    cdef double f64(self) except? -1.0:
        cdef double v
        self.need(WIRE_F64_SIZE)
        memcpy(&v, self.p + self.pos, WIRE_F64_SIZE)
        self.pos += WIRE_F64_SIZE
        return v

    cdef tuple f64s(self):
        cdef uint32_t n = self.u32()
        self.need(<Py_ssize_t>n * WIRE_F64_SIZE)
        cdef list out = []
        cdef uint32_t i
        for i in range(n):
            out.append(self.f64())
        return tuple(out)

    cdef MetricOp metric_op(self):
        cdef uint8_t op = self.u8()
        cdef uint32_t n, i
        cdef MetricOp m
        if op == OP_FAMILY_NEW:
            m = _metric_op(op, 0)
            m.family = self.u32()
            m.kind = self.u32()
            if m.kind > 2:
                raise ProtocolError(f"unknown metric kind {m.kind}")
            m.name = self.string()
            m.description = self.string()
        elif op == OP_FAMILY_DELETE:
            m = _metric_op(op, 0)
            m.family = self.u32()
        elif op == OP_METRIC_DELETE or op == OP_VALUE:
            m = _metric_op(op, self.u32())
        elif op == OP_METRIC_NEW:
            m = _metric_op(op, self.u32())
            m.family = self.u32()
            n = self.u32()
            self.need(<Py_ssize_t>n * WIRE_LABEL_MIN_SIZE)
            labels = []
            for i in range(n):
                key = self.string()
                labels.append((key, self.string()))
            m.labels = tuple(labels)
            m.values = self.f64s()
        elif op == OP_INCREMENT or op == OP_SET:
            m = _metric_op(op, self.u32())
            m.value = self.f64()
        elif op == OP_OBSERVE:
            m = _metric_op(op, self.u32())
            m.values = self.f64s()
        else:
            raise ProtocolError(f"unknown metric op {op}")
        return m

    cdef str string(self):
        # Texts are data (request ids, names, messages): a sequence that is
        # not UTF-8 becomes U+FFFD, as the backend makes it (docs/protocol.md,
        # "Text"); the check costs nothing while the text is valid.
        cdef uint32_t n = self.u32()
        self.need(n)
        cdef str s = PyUnicode_DecodeUTF8(<const char*>(self.p + self.pos), n, "replace")
        self.pos += n
        return s

    cdef int zero32(self) except -1:
        if self.u32() != 0:
            raise ProtocolError("a reserved field is not zero")
        return 0

    cdef int pad8(self) except -1:
        cdef Py_ssize_t n = (WIRE_PAD_ALIGN - self.pos % WIRE_PAD_ALIGN) % WIRE_PAD_ALIGN
        self.need(n)
        cdef Py_ssize_t i
        for i in range(n):
            if self.p[self.pos + i] != 0:
                raise ProtocolError("padding is not zero")
        self.pos += n
        return 0

    cdef WireTensor tensor(self, bint receiver_arena_ok=False):
        """A tensor; inline data stays in the frame (its offset is read)."""
        cdef str name = self.string()
        cdef uint32_t dtype = self.u32()
        if dtype < 1 or dtype > 14:
            raise ProtocolError(f"tensor '{name}': unknown data type {dtype}")
        cdef uint32_t ndim = self.u32()
        if ndim > WIRE_MAX_NDIM:
            raise ProtocolError(f"tensor '{name}': {ndim} dimensions, at most {MAX_NDIM}")
        cdef tuple dims = PyTuple_New(ndim)  # filled in place: no list first
        cdef int64_t d
        cdef uint32_t i
        cdef object dim
        for i in range(ndim):
            d = self.i64()
            if d < 0:
                raise ProtocolError(f"tensor '{name}': negative dimension {d}")
            dim = d
            Py_INCREF(dim)  # the tuple takes this reference
            PyTuple_SET_ITEM(dims, i, dim)
        cdef uint64_t byte_size = self.u64()
        cdef uint8_t loc = self.u8()
        cdef WireTensor t = WireTensor.__new__(WireTensor)
        if loc == LOC_INLINE:
            self.pad8()
            if byte_size > <uint64_t>(self.end - self.pos):
                raise ProtocolError(f"tensor '{name}': {byte_size} inline bytes past the frame end")
            t.offset = self.pos
            self.pos += <Py_ssize_t>byte_size
        elif loc == LOC_ARENA or (receiver_arena_ok and loc == LOC_RECEIVER_ARENA):
            t.arena_id = self.u32()
            self.zero32()
            t.arena_offset = self.u64()
        else:
            raise ProtocolError(f"tensor '{name}': unknown location {loc}")
        t.name = name
        t.dtype = dtype
        t.dims = dims
        t.byte_size = byte_size
        t.location = loc
        return t

    cdef WireRequest request(self):
        """One request entry of EXECUTE / BLS_REQUEST."""
        cdef uint32_t j, k
        cdef WireRequest q = WireRequest.__new__(WireRequest)
        rid = self.string()
        cdef uint8_t kind = self.u8()
        cu = self.u64()
        cs = self.string()
        if kind == 0:
            corr = None
        elif kind == 1:
            corr = cu
        elif kind == 2:
            corr = cs
        else:
            raise ProtocolError(f"request '{rid}': unknown correlation kind {kind}")
        q.request_id = rid
        q.correlation_id = corr
        q.flags = self.u32()
        q.timeout_us = self.u64()
        q.parameters = self.string()
        k = self.u32()
        cdef list names = []
        for j in range(k):
            names.append(self.string())
        q.requested_output_names = tuple(names)
        k = self.u32()
        cdef list tensors = []
        for j in range(k):
            tensors.append(self.tensor())
        q.inputs = tuple(tensors)
        q.trace_context = self.string()
        return q

    cdef WireResponse response(self, uint32_t flags, bint receiver_arena_ok):
        """What follows the flags of a RESPONSES entry and of a BLS_RESPONSE."""
        cdef WireResponse resp = WireResponse.__new__(WireResponse)
        resp.flags = flags
        resp.has_error = self.u8() != 0
        resp.error_code = self.u32()
        resp.error_message = self.string()
        resp.parameters = self.string()
        cdef uint32_t k = self.u32()
        cdef uint32_t j
        cdef list tensors = []
        for j in range(k):
            tensors.append(self.tensor(receiver_arena_ok))
        resp.outputs = tuple(tensors)
        return resp

    cdef int done(self) except -1:
        if self.pos != self.end:
            raise ProtocolError(f"{self.end - self.pos} trailing bytes after the body")
        return 0


# Entry points take any contiguous buffer (bytes, bytearray, memoryview,
# mmap) through the buffer protocol directly: a typed memoryview argument
# costs more to set up than decoding a small frame.


def decode_header(buf):
    """Check the header of a whole message; return (type, flags, id, body_len)."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        return _decode_header(<const uint8_t*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


cdef tuple _decode_header(const uint8_t* p, Py_ssize_t n):
    if n < WIRE_HEADER_SIZE:
        raise ProtocolError(f"a {n}-byte message is shorter than the frame header")
    if n > WIRE_MAX_FRAME:
        raise ProtocolError(f"a {n}-byte message is longer than MAX_FRAME")
    cdef uint32_t magic, body_len, reserved
    cdef uint16_t flags
    cdef uint64_t fid
    memcpy(&magic, p + WIRE_HEADER_MAGIC_OFFSET, WIRE_U32_SIZE)
    memcpy(&flags, p + WIRE_HEADER_FLAGS_OFFSET, WIRE_U16_SIZE)
    memcpy(&fid, p + WIRE_HEADER_ID_OFFSET, WIRE_U64_SIZE)
    memcpy(&body_len, p + WIRE_HEADER_BODY_LEN_OFFSET, WIRE_U32_SIZE)
    memcpy(&reserved, p + WIRE_HEADER_RESERVED_OFFSET, WIRE_U32_SIZE)
    if magic != _MAGIC:
        raise ProtocolError(f"bad magic {magic:#x}")
    cdef uint8_t version = p[WIRE_HEADER_VERSION_OFFSET]
    if version != VERSION:
        raise ProtocolError(f"protocol version {version}, this stub speaks {VERSION}")
    cdef int ftype = p[WIRE_HEADER_TYPE_OFFSET]
    if ftype < 1 or ftype > _LAST_TYPE:
        raise ProtocolError(f"unknown frame type {ftype}")
    cdef uint16_t allowed = FLAG_BODY_IN_ARENA
    if ftype == RESPONSES:
        allowed |= FLAG_BATCH_DONE
    if flags & ~allowed:
        raise ProtocolError(f"unknown flags {flags:#x} on frame type {ftype}")
    if reserved != 0:
        raise ProtocolError("the header's reserved field is not zero")
    if flags & FLAG_BODY_IN_ARENA:
        if n != WIRE_HEADER_SIZE + WIRE_ARENA_REF_SIZE:
            raise ProtocolError("a BODY_IN_ARENA frame must carry exactly an arena reference")
    elif body_len != n - WIRE_HEADER_SIZE:
        raise ProtocolError(
            f"body_len {body_len} does not match the {n - WIRE_HEADER_SIZE} bytes received")
    return ftype, flags, fid, body_len


def decode_arena_ref(buf):
    """The (arena_id, offset) of a BODY_IN_ARENA frame whose header is valid."""
    cdef Py_buffer view
    cdef _Reader r = _Reader.__new__(_Reader)
    cdef uint32_t aid
    cdef uint64_t off
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        r.p = <const uint8_t*>view.buf
        r.pos = WIRE_HEADER_SIZE
        r.end = view.len
        aid = r.u32()
        r.zero32()
        off = r.u64()
        r.done()
    finally:
        PyBuffer_Release(&view)
    return aid, off


def decode_body(int ftype, buf, Py_ssize_t start=WIRE_HEADER_SIZE):
    """Decode the body of a frame of type ``ftype`` that occupies
    ``buf[start:]``. Offsets of inline tensor data in the result are
    offsets into ``buf``.

    The frames with requests, tensors, responses or metric operations
    decode to read-only records (fields: _codec.pxd):

    EXECUTE -> list of WireRequest, their inputs WireTensor;
    RESPONSES -> list of WireResponse, their outputs WireTensor;
    BLS_REQUEST -> BlsRequest; BLS_RESPONSE -> WireResponse;
    METRIC -> list of MetricOp.

    The others decode to tuples, in the order of the frame's fields:
    JSON frames -> the dict; ARENA -> (arena_id, size);
    EXECUTE_DONE -> (ok, error); LOG -> (level, file, line, message);
    ERROR -> message; RELEASE -> list of (arena_id, offset);
    CANCEL -> list of (batch_id, request_index);
    SEND_ERROR -> (batch_id, request_index, code, message);
    READY -> (ready, message); FINALIZE, IS_READY, DRAIN, BLS_CANCEL,
    BLS_CHANNEL -> None;
    BLS_ARENA -> (arena_id, size); BLS_RELEASE -> list of (arena_id, offset);
    METRIC_DONE -> (ok, error, value); LOG_LEVELS -> enabled (bit mask).
    """
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        return _decode_body(ftype, <const uint8_t*>view.buf, view.len, start)
    finally:
        PyBuffer_Release(&view)


cdef object _decode_body(int ftype, const uint8_t* p, Py_ssize_t n, Py_ssize_t start):
    if start < 0 or start > n:
        raise ProtocolError("body start outside the buffer")
    cdef _Reader r = _Reader.__new__(_Reader)
    r.p = p
    r.pos = start
    r.end = n
    cdef object out
    cdef uint32_t count, i, j, k
    cdef list items, names, tensors
    cdef uint8_t kind, has_error
    cdef uint32_t aid, rflags
    cdef BlsRequest bls
    cdef WireResponse resp
    if ftype == _EXECUTE_TYPE:  # the frame of every batch: no Python compares first
        count = r.u32()
        items = []
        for i in range(count):
            items.append(r.request())
        r.done()
        return items
    if ftype in _JSON_TYPES:
        try:
            out = json.loads(PyUnicode_DecodeUTF8(<const char*>(r.p + r.pos), r.end - r.pos, "replace"))
        except ValueError as e:
            raise ProtocolError(f"frame type {ftype}: body is not JSON: {e}") from None
        if not isinstance(out, dict):
            raise ProtocolError(f"frame type {ftype}: JSON body is not an object")
        return out
    cdef uint64_t bid
    if (ftype == FINALIZE or ftype == IS_READY or ftype == DRAIN or ftype == BLS_CANCEL
            or ftype == BLS_CHANNEL):
        out = None
    elif ftype == BLS_RESPONSE:
        rflags = r.u32()
        if rflags & ~(<uint32_t>RESP_FINAL):
            raise ProtocolError(f"unknown BLS response flags {rflags:#x}")
        out = r.response(rflags, False)
    elif ftype == METRIC_DONE:
        ok = r.u8()
        err_text = r.string()
        out = (ok, err_text, r.f64())
    elif ftype == METRIC:
        count = r.u32()
        r.need(<Py_ssize_t>count * WIRE_METRIC_OP_MIN_SIZE)
        items = []
        for i in range(count):
            items.append(r.metric_op())
        out = items
    elif ftype == BLS_REQUEST:
        bls = BlsRequest.__new__(BlsRequest)
        bls.model_name = r.string()
        bls.model_version = r.i64()
        bls.trace_batch_id = r.u64()
        bls.trace_request_index = r.u32()
        bls.request = r.request()
        out = bls
    elif ftype == CANCEL:
        count = r.u32()
        items = []
        for i in range(count):
            bid = r.u64()
            idx = r.u32()
            r.zero32()
            items.append((bid, idx))
        out = items
    elif ftype == SEND_ERROR:
        bid = r.u64()
        idx = r.u32()
        code = r.u32()
        out = (bid, idx, code, r.string())
    elif ftype == READY:
        ok = r.u8()
        out = (ok, r.string())
    elif ftype == ARENA or ftype == BLS_ARENA:
        aid = r.u32()
        r.zero32()
        out = (aid, r.u64())
    elif ftype == RESPONSES:
        count = r.u32()
        items = []
        for i in range(count):
            bid = r.u64()
            idx = r.u32()
            rflags = r.u32()
            if rflags & ~_RESP_FLAGS:
                raise ProtocolError(f"response {i}: unknown response flags {rflags:#x}")
            resp = r.response(rflags, True)
            resp.batch_id = bid
            resp.request_index = idx
            items.append(resp)
        out = items
    elif ftype == EXECUTE_DONE:
        ok = r.u8()
        out = (ok, r.string())
    elif ftype == LOG_LEVELS:
        out = r.u32()
        if out & ~LOG_LEVELS_ALL:
            raise ProtocolError(f"unknown log level bits {out:#x}")
    elif ftype == LOG:
        level = r.u32()
        f = r.string()
        line = r.u32()
        out = (level, f, line, r.string())
    elif ftype == ERROR:
        out = r.string()
    elif ftype == RELEASE or ftype == BLS_RELEASE:
        count = r.u32()
        items = []
        for i in range(count):
            aid = r.u32()
            r.zero32()
            items.append((aid, r.u64()))
        out = items
    else:
        raise ProtocolError(f"unknown frame type {ftype}")
    r.done()
    return out
