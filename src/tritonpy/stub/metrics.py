# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Custom metrics, stub side: handles, calls and METRIC frames.

Every operation of model code is a call: one METRIC frame with a call id,
carrying the deletions queued before it and then the operation, answered
by METRIC_DONE once the backend has applied it (docs/protocol.md, *Custom
metrics*). So an update is in Triton's registry when ``increment()``,
``set()`` or ``observe()`` returns, as on the official backend: a model
that scrapes the metrics endpoint itself right after sees it. Calls reuse
the BLS client's waiting machinery, so they work from the loop thread
(also inside ``initialize``), from coroutines and from threads.

Deletions (``__del__`` of a family or metric, which may run anywhere the
garbage collector does) never wait: they are queued under ``lock`` and
sent once per loop iteration, before that iteration's responses, or with
the next call.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any

from tritonpy.pb_utils._seam import TritonModelException
from tritonpy.stub import _codec as C
from tritonpy.stub.outbound import check_fits, encode_metric

if TYPE_CHECKING:
    from tritonpy.stub._channel import Channel
    from tritonpy.stub.bls import BlsClient, Call
    from tritonpy.stub.names import ModelNames
    from tritonpy.stub.outbound import Outbound
    from tritonpy.stub.turns import Turns

__all__ = ["MetricClient", "encode_metric"]


class MetricClient:
    def __init__(
        self,
        out: Outbound,
        turns: Turns,
        channel: Channel,
        bls: BlsClient,
        names: ModelNames,
    ) -> None:
        self.out = out
        self.turns = turns
        self.channel = channel  # closed: the backend dropped every handle
        self.bls = bls  # calls reuse its ids, its waiting and its replies
        self.names = names
        # Reentrant: a metric collected by the GC while the lock is held
        # queues its deletion from inside the locked region.
        self.lock = threading.RLock()
        self.deletes: list[tuple] = []  # METRIC_DELETE / FAMILY_DELETE ops
        self.scheduled = False  # a flush is scheduled on the loop
        self._handles = itertools.count(1)  # next() is atomic

    def model_name(self) -> str:
        return str(self.names.model)

    # ---------------------------------------------------------------- deletions

    def _take_deletes(self) -> list[tuple]:
        """Called with ``lock`` held."""
        ops, self.deletes = self.deletes, []
        self.scheduled = False
        return ops

    def flush(self) -> None:
        """Send the queued deletions (loop thread, or a reader in turn)."""
        if not self.deletes:
            self.scheduled = False
            return
        with self.lock:
            ops = self._take_deletes()
        if ops:
            self.out.metric(ops)

    def delete_metric(self, handle: int) -> None:
        self._queue_delete((C.OP_METRIC_DELETE, handle))

    def delete_family(self, handle: int) -> None:
        self._queue_delete((C.OP_FAMILY_DELETE, handle))

    def _queue_delete(self, op: tuple) -> None:
        if self.channel.closed:
            return  # the backend dropped every handle of this stub already
        with self.lock:
            self.deletes.append(op)
            if not self.scheduled:
                self.scheduled = True
                self.turns.soon(self.flush)

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

    def increment(self, handle: int, value: float) -> None:
        self._update((C.OP_INCREMENT, handle, value), "increment metric value")

    def set(self, handle: int, value: float) -> None:
        self._update((C.OP_SET, handle, value), "set metric value")

    def observe(self, handle: int, value: float) -> None:
        self._update((C.OP_OBSERVE, handle, [value]), "observe metric value")

    def _update(self, op: tuple, action: str) -> None:
        reply = self._call(op)
        if not reply.get("ok"):
            raise TritonModelException(
                f"Failed to {action} (model '{self.model_name()}'): {reply.get('error', '')}"
            )

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
        self.bls.on_control_done(call_id, {"ok": bool(ok), "error": error, "value": value})

    def _call(self, op: tuple) -> dict[str, Any]:
        bls = self.bls
        if self.channel.closed:
            raise TritonModelException(
                f"custom metrics of model '{self.model_name()}': the server connection is closed"
            )
        check_fits(op)  # before anything is queued
        call = bls.control_call()
        self.turns.run(self._start, call, op)
        return bls.reply(call)

    def _start(self, call: Call, op: tuple) -> None:
        """Where the channel may be used (see BlsClient): queued deletions
        first, then ``op``, the last frame carrying the call id."""
        with self.lock:
            ops = self._take_deletes()
        ops.append(op)
        self.bls.register(call)
        self.out.metric(ops, call.id)
