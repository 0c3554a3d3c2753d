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
from typing import TYPE_CHECKING, Any

from tritonpy.pb_utils import TritonModelException
from tritonpy.pb_utils._metrics import take_pending
from tritonpy.stub import _codec as C
from tritonpy.stub.outbound import check_fits, encode_metric

if TYPE_CHECKING:
    from tritonpy.stub.bls import Call
    from tritonpy.stub.runtime import Stub

__all__ = ["MetricClient", "encode_metric"]


class MetricClient:
    def __init__(self, stub: Stub) -> None:
        self.stub = stub
        self.out = stub.out
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
            self.out.metric(ops)

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
        check_fits(op)  # before anything is queued
        call = bls.control_call()
        self.stub.turns.run(self._start, call, op)
        return bls.reply(call)

    def _start(self, call: Call, op: tuple) -> None:
        """Where the channel may be used (see BlsClient): pending ops
        first, then ``op``, the last frame carrying the call id."""
        with self.lock:
            ops, dirty = self._take_pending()
        del dirty
        ops.append(op)
        self.stub.bls.register(call)
        self.out.metric(ops, call.id)
