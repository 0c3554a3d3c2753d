# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Custom metrics, stub side: handles, pending updates and METRIC frames.

``pb_utils.Metric`` objects keep their own pending change (a summed
increment, a set value, a list of observations) and put themselves on
``MetricClient.dirty`` under ``lock``; ``flush`` turns the dirty metrics and
the queued deletions into METRIC frames once per loop iteration, and the
engine flushes them before any RESPONSES frame. Creation and ``value()``
are calls: one METRIC frame with a call id that carries every pending op
first, answered by METRIC_DONE (docs/protocol.md, *Custom metrics*). Calls
reuse the BLS client's waiting machinery, so they work from the loop
thread (also inside ``initialize``), from coroutines and from threads.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from tritonpy.pb_utils import TritonModelException
from tritonpy.pb_utils._metrics import take_pending
from tritonpy.stub import _codec as C
from tritonpy.stub.bls import _Call

# Observations per OBSERVE op, so that one op always fits in a frame.
_OBSERVE_CHUNK = 8192
# Room for the header and the op count.
_FRAME_ROOM = C.MAX_FRAME - C.HEADER_SIZE - 4


class MetricClient:
    def __init__(self, stub: Any) -> None:
        self.stub = stub
        self.loop = stub.loop
        # Reentrant: a metric collected by the GC while the lock is held
        # queues its deletion from inside the locked region.
        self.lock = threading.RLock()
        self.dirty: list[Any] = []  # metrics with a pending change
        self.deletes: list[tuple] = []  # METRIC_DELETE / FAMILY_DELETE ops
        self.scheduled = False  # a flush is scheduled on the loop
        self._handles = itertools.count(1)  # next() is atomic

    def model_name(self) -> str:
        return str(self.stub.model_name)

    # ---------------------------------------------------------------- updates

    def schedule(self) -> None:
        """Called with ``lock`` held: flush on the loop's next iteration."""
        self.scheduled = True
        self.stub.turns.soon(self.flush)

    def _take_pending(self) -> tuple[list[tuple], list[Any]]:
        """Called with ``lock`` held. The dirty list is returned so that
        the last references to metrics die outside the lock."""
        dirty, self.dirty = self.dirty, []
        ops: list[tuple] = []
        for m in dirty:
            h, value, delta, observations = take_pending(m)
            if value is not None:
                ops.append((C.OP_SET, h, value))
            if delta:
                ops.append((C.OP_INCREMENT, h, delta))
            if observations:
                ops.append((C.OP_OBSERVE, h, observations))
        if self.deletes:
            ops.extend(self.deletes)
            self.deletes = []
        self.scheduled = False
        return ops, dirty

    def flush(self) -> None:
        """Send every pending update and deletion (loop thread)."""
        if not self.dirty and not self.deletes:
            self.scheduled = False
            return
        with self.lock:
            ops, dirty = self._take_pending()
        del dirty
        if ops:
            channel = self.stub.channel
            for frame in encode_metric(ops, 0):
                channel.send(frame)

    def delete_metric(self, handle: int) -> None:
        self._queue_delete((C.OP_METRIC_DELETE, handle))

    def delete_family(self, handle: int) -> None:
        self._queue_delete((C.OP_FAMILY_DELETE, handle))

    def _queue_delete(self, op: tuple) -> None:
        if self.stub.channel.closed:
            return  # the backend dropped every handle of this stub already
        with self.lock:
            self.deletes.append(op)
            if not self.scheduled:
                self.schedule()

    # ---------------------------------------------------------------- calls

    def family_new(self, name: str, description: str, kind: int) -> int:
        return self._create(
            (C.OP_FAMILY_NEW, 0, kind, name, description),
            f"Error when creating MetricFamily '{name}'",
        )

    def metric_new(
        self, family: int, labels: list[tuple[str, str]], buckets: list[float], what: str
    ) -> int:
        return self._create(
            (C.OP_METRIC_NEW, 0, family, labels, buckets),
            f"Error when creating a metric of {what} with labels {dict(labels)}",
        )

    def _create(self, op: tuple, failure: str) -> int:
        """Runs a FAMILY_NEW or METRIC_NEW ``op`` under a new handle."""
        handle = next(self._handles)
        reply = self._call((op[0], handle, *op[2:]))
        if not reply.get("ok"):
            raise TritonModelException(
                f"{failure} (model '{self.model_name()}'): {reply.get('error', '')}"
            )
        return handle

    def value(self, handle: int) -> float:
        reply = self._call((C.OP_VALUE, handle))
        if not reply.get("ok"):
            raise TritonModelException(
                f"Failed to get metric value (model '{self.model_name()}'): "
                f"{reply.get('error', '')}"
            )
        return float(reply.get("value", 0.0))

    def on_done(self, call_id: int, body: tuple) -> None:
        ok, error, value = body
        self.stub.bls.on_control_done(call_id, {"ok": bool(ok), "error": error, "value": value})

    def _call(self, op: tuple) -> dict[str, Any]:
        bls = self.stub.bls
        if self.stub.channel.closed:
            raise TritonModelException(
                f"custom metrics of model '{self.model_name()}': the server connection is closed"
            )
        _check_fits(op)  # before anything is queued
        call = _Call(bls, bls._new_id(), False)
        call.control = True
        self.stub.turns.run(self._start, call, op)
        while not call.final:
            bls._wait_sync(call)
        return call.reply or {"ok": False, "error": "no answer"}

    def _start(self, call: _Call, op: tuple) -> None:
        """Where the channel may be used (see BlsClient): pending ops
        first, then ``op``, the last frame carrying the call id."""
        with self.lock:
            ops, dirty = self._take_pending()
        del dirty
        ops.append(op)
        self.stub.bls._calls[call.id] = call
        for frame in encode_metric(ops, call.id):
            self.stub.channel.send(frame)


# ------------------------------------------------------------------ encoding


def _op_size(op: tuple) -> int:
    code = op[0]
    if code in (C.OP_INCREMENT, C.OP_SET):
        return 13
    if code == C.OP_OBSERVE:
        return 9 + 8 * len(op[2])
    if code == C.OP_FAMILY_NEW:
        return 17 + len(op[3].encode()) + len(op[4].encode())
    if code == C.OP_METRIC_NEW:
        labels = sum(8 + len(k.encode()) + len(v.encode()) for k, v in op[3])
        return 17 + labels + 8 * len(op[4])
    return 5


def _check_fits(op: tuple) -> int:
    size = _op_size(op)
    if size > _FRAME_ROOM:
        raise TritonModelException(
            f"a metric name, description or label set of {size} bytes does not fit "
            f"in one frame ({C.MAX_FRAME} bytes)"
        )
    return size


def _write_op(w: C.FrameWriter, op: tuple) -> None:
    code = op[0]
    w.u8(code)
    w.u32(op[1])
    if code in (C.OP_INCREMENT, C.OP_SET):
        w.f64(op[2])
    elif code == C.OP_OBSERVE:
        w.u32(len(op[2]))
        for v in op[2]:
            w.f64(v)
    elif code == C.OP_FAMILY_NEW:
        w.u32(op[2])
        w.string(op[3])
        w.string(op[4])
    elif code == C.OP_METRIC_NEW:
        w.u32(op[2])
        w.u32(len(op[3]))
        for key, value in op[3]:
            w.string(key)
            w.string(value)
        w.u32(len(op[4]))
        for b in op[4]:
            w.f64(b)


def _split(ops: list[tuple]) -> list[tuple]:
    out = []
    for op in ops:
        if op[0] == C.OP_OBSERVE and len(op[2]) > _OBSERVE_CHUNK:
            values = op[2]
            for i in range(0, len(values), _OBSERVE_CHUNK):
                out.append((C.OP_OBSERVE, op[1], values[i : i + _OBSERVE_CHUNK]))
        else:
            out.append(op)
    return out


def encode_metric(ops: list[tuple], call_id: int) -> list[bytes]:
    """METRIC frames holding ``ops`` (tuples as ``_codec.decode_body``
    returns them), as few as fit; the last one carries ``call_id``."""
    groups: list[list[tuple]] = [[]]
    room = _FRAME_ROOM
    for op in _split(ops):
        size = _check_fits(op)
        if size > room and groups[-1]:
            groups.append([])
            room = _FRAME_ROOM
        groups[-1].append(op)
        room -= size
    frames = []
    for i, group in enumerate(groups):
        w = C.FrameWriter()
        w.begin(C.METRIC, call_id if i == len(groups) - 1 else 0)
        w.u32(len(group))
        for op in group:
            _write_op(w, op)
        frames.append(w.finish())
    return frames
