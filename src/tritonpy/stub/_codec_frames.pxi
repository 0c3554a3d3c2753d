# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# Whole frames of the stub's own making, included by _codec.pyx: the bodies
# of LOG, EXECUTE_DONE, READY, ERROR and the JSON frames as open writers
# (stub/outbound.py cuts their texts to fit and finishes them), and RELEASE
# and METRIC frames, split over as many as their lists need
# (docs/protocol.md, "Custom metrics").

# ------------------------------------------------------------------ texts


def log_writer(uint32_t level, str file, uint32_t line, str message):
    """An open LOG frame: ``finish()`` it, or move its body to an arena."""
    cdef FrameWriter w = FrameWriter()
    w.begin(LOG)
    w.u32(level)
    w.string(file)
    w.u32(line)
    w.string(message)
    return w


def flag_text_writer(int ftype, uint64_t fid, bint flag, str message):
    """An open EXECUTE_DONE or READY frame: ``u8 ok|ready, str message``."""
    cdef FrameWriter w = FrameWriter()
    w.begin(ftype, fid)
    w.u8(1 if flag else 0)
    w.string(message)
    return w


def error_writer(str message):
    """An open ERROR frame."""
    cdef FrameWriter w = FrameWriter()
    w.begin(ERROR)
    w.string(message)
    return w


def json_writer(int ftype, dict obj, uint64_t fid=0):
    """An open frame whose body is the JSON of ``obj``."""
    cdef FrameWriter w = FrameWriter()
    w.begin(ftype, fid)
    w.json_body(obj)
    return w


def body_in_arena(bytes frame):
    """Whether the finished ``frame`` carries its body in an arena."""
    return (frame[WIRE_HEADER_FLAGS_OFFSET] & FLAG_BODY_IN_ARENA) != 0


# ------------------------------------------------------------------ RELEASE

# Arena references one RELEASE frame holds: what the header and the count
# leave.
cdef Py_ssize_t _REFS_PER_FRAME = (
    WIRE_MAX_FRAME - WIRE_HEADER_SIZE - WIRE_RELEASE_MIN_SIZE) // WIRE_ALLOCATION_SIZE


def encode_releases(int ftype, list refs):
    """RELEASE or BLS_RELEASE frames returning ``refs`` (``(arena_id,
    offset)`` pairs), as few as hold them."""
    cdef Py_ssize_t i
    return [encode_simple(ftype, refs[i:i + _REFS_PER_FRAME])
            for i in range(0, len(refs), _REFS_PER_FRAME)]


# ------------------------------------------------------------------ METRIC

# Observations per OBSERVE op, so that one op always fits in a frame.
cdef Py_ssize_t _OBSERVE_CHUNK = 8192
# Bytes of ops a METRIC frame carries: what the header and the count leave.
cdef Py_ssize_t _METRIC_ROOM = WIRE_MAX_FRAME - WIRE_HEADER_SIZE - WIRE_METRIC_MIN_SIZE


cdef Py_ssize_t _text_size(object s) except -1:
    if type(s) is str:
        return _utf8_size(s)
    return len(_utf8_bytes(s))


cdef Py_ssize_t _op_size(tuple op) except -1:
    cdef int code = op[0]
    cdef Py_ssize_t size
    if code == OP_INCREMENT or code == OP_SET:
        return WIRE_METRIC_OP_INCREMENT_MIN_SIZE  # op, metric, value
    if code == OP_OBSERVE:
        return WIRE_METRIC_OP_OBSERVE_MIN_SIZE + WIRE_F64_SIZE * len(op[2])
    if code == OP_FAMILY_NEW:
        # op, family, kind, name and description lengths, their bytes
        return WIRE_METRIC_OP_FAMILY_NEW_MIN_SIZE + _text_size(op[3]) + _text_size(op[4])
    if code == OP_METRIC_NEW:
        # op, metric, family, label count, bucket count, buckets
        size = WIRE_METRIC_OP_METRIC_NEW_MIN_SIZE + WIRE_F64_SIZE * len(op[4])
        for key, value in op[3]:
            size += WIRE_LABEL_MIN_SIZE + _text_size(key) + _text_size(value)
        return size
    return WIRE_METRIC_OP_MIN_SIZE  # op, handle


def metric_op_size(tuple op):
    """The bytes the METRIC ``op`` (a tuple as decode_body returns it)
    takes in a frame; OverflowError when that is more than one frame
    holds (a long OBSERVE list excepted: encode_metric splits it)."""
    return _fitting_op_size(op)


cdef Py_ssize_t _fitting_op_size(tuple op) except -1:
    cdef Py_ssize_t size = _op_size(op)
    if size > _METRIC_ROOM:
        raise OverflowError(
            f"a metric name, description or label set of {size} bytes does not fit "
            f"in one frame ({MAX_FRAME} bytes)")
    return size


cdef int _write_op(FrameWriter w, tuple op) except -1:
    cdef int code = op[0]
    w.u8(code)
    w.u32(op[1])
    if code == OP_INCREMENT or code == OP_SET:
        w.f64(op[2])
    elif code == OP_OBSERVE:
        w.u32(len(op[2]))
        for v in op[2]:
            w.f64(v)
    elif code == OP_FAMILY_NEW:
        w.u32(op[2])
        w.string(op[3])
        w.string(op[4])
    elif code == OP_METRIC_NEW:
        w.u32(op[2])
        w.u32(len(op[3]))
        for key, value in op[3]:
            w.string(key)
            w.string(value)
        w.u32(len(op[4]))
        for b in op[4]:
            w.f64(b)
    return 0


cdef list _split_observes(list ops):
    cdef list out = []
    cdef tuple op
    cdef Py_ssize_t i
    for op in ops:
        if op[0] == OP_OBSERVE and len(op[2]) > _OBSERVE_CHUNK:
            values = op[2]
            for i in range(0, len(values), _OBSERVE_CHUNK):
                out.append((OP_OBSERVE, op[1], values[i:i + _OBSERVE_CHUNK]))
        else:
            out.append(op)
    return out


def encode_metric(list ops, uint64_t call_id):
    """METRIC frames holding ``ops`` (tuples as decode_body returns them),
    as few as fit; the last one carries ``call_id``. OverflowError for an
    op that no frame holds (see metric_op_size)."""
    cdef list group = []
    cdef list groups = [group]
    cdef Py_ssize_t room = _METRIC_ROOM
    cdef Py_ssize_t size, i
    cdef tuple op
    for op in _split_observes(ops):
        size = _fitting_op_size(op)
        if size > room and group:
            group = []
            groups.append(group)
            room = _METRIC_ROOM
        group.append(op)
        room -= size
    cdef list frames = []
    cdef FrameWriter w
    for i in range(len(groups)):
        w = FrameWriter()
        w.begin(METRIC, call_id if i == len(groups) - 1 else 0)
        w.u32(len(groups[i]))
        for op in groups[i]:
            _write_op(w, op)
        frames.append(w.finish())
    return frames
