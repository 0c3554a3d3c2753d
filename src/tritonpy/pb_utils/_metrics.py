# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Custom metrics: ``MetricFamily`` and its ``Metric`` objects, shown at
Triton's metrics endpoint (``:8002/metrics``).

Creating a family or a metric and reading ``value()`` ask the server and
wait. ``increment()``, ``set()`` and ``observe()`` never wait: they update
the metric's pending change under a lock, and the stub sends the pending
changes of all metrics once per loop iteration, before the responses of
that iteration (docs/protocol.md, *Custom metrics*). Their errors are
raised here, at the call, since the kind of each metric is known.

Families and metrics are deleted from the server when their Python objects
are collected (a metric keeps its family alive), and all of them when the
model is unloaded or its stub dies.
"""

from __future__ import annotations

import enum
from typing import Any

from . import _host
from ._errors import TritonModelException
from ._text import text

__all__ = ["MetricKind", "MetricFamily", "Metric", "take_pending"]


class MetricKind(enum.IntEnum):
    """Values of TRITONSERVER_MetricKind."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


_KIND_NAMES = ("counter", "gauge", "histogram")


def _need_client() -> _host.Metrics:
    return _host.need("custom metrics need a running tritonpy stub").metrics


class MetricFamily:
    """A named metric of one kind; ``Metric(labels)`` adds one labelled series.

    ``kind`` is ``MetricFamily.COUNTER``, ``.GAUGE`` or ``.HISTOGRAM``. Two
    families of the same name and kind (in this model or another) share
    their series in Triton, as in the official backend.
    """

    __slots__ = ("_name", "_description", "_kind", "_handle", "_client", "__weakref__")

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        self._handle = 0
        # bytes and numpy scalars too, as in the official backend (_text.py)
        name_text, description_text = text(name), text(description)
        if not name_text:
            raise TritonModelException("MetricFamily: name must be a non-empty str")
        if description_text is None:
            raise TritonModelException("MetricFamily: description must be a str")
        name, description = name_text, description_text
        try:
            kind = MetricKind(kind)
        except ValueError:
            raise TritonModelException(
                f"MetricFamily '{name}': kind must be MetricFamily.COUNTER, GAUGE or "
                f"HISTOGRAM, got {kind!r}"
            ) from None
        self._name = name
        self._description = description
        self._kind = kind
        self._client = _need_client()
        self._handle = self._client.family_new(name, description, int(kind))

    def Metric(
        self,
        labels: dict[str, str] | None = None,  # noqa: N802 - official name
        buckets: list[float] | None = None,
    ) -> Metric:
        """A series of this family with ``labels`` (str to str);
        histograms need ``buckets``, the upper bounds of their buckets."""
        what = f"{_KIND_NAMES[self._kind]} family '{self._name}'"
        if labels is None:
            labels = {}
        if not isinstance(labels, dict):
            raise TritonModelException(
                f"Failed to create metric of {what}: labels must be a dict, "
                f"got {type(labels).__name__}"
            )
        for key, value in labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TritonModelException(
                    f"Failed to create metric of {what}: labels must map str to str, "
                    f"got {key!r}: {value!r}"
                )
        bounds: list[float] = []
        if self._kind == MetricKind.HISTOGRAM:
            if buckets is None:
                raise TritonModelException(
                    f"Failed to create metric of {what}: a histogram needs buckets "
                    "(a list of bucket upper bounds)"
                )
            if not isinstance(buckets, (list, tuple)):
                raise TritonModelException(
                    f"Failed to create metric of {what}: buckets must be a list, "
                    f"got {type(buckets).__name__}"
                )
            try:
                bounds = [float(b) for b in buckets]
            except (TypeError, ValueError):
                raise TritonModelException(
                    f"Failed to create metric of {what}: buckets must be numbers, got {buckets!r}"
                ) from None
        elif buckets is not None:
            raise TritonModelException(
                f"Failed to create metric of {what}: only histograms take buckets"
            )
        handle = self._client.metric_new(self._handle, list(labels.items()), bounds, what)
        return Metric._new(self, handle, dict(labels))

    def __del__(self) -> None:
        if self._handle:
            self._client.delete_family(self._handle)

    def __repr__(self) -> str:
        return (
            f"MetricFamily({self._name!r}, {self._description!r}, "
            f"MetricFamily.{MetricKind(self._kind).name})"
        )


class Metric:
    """One labelled series of a ``MetricFamily``: counters ``increment()``,
    gauges ``increment()`` and ``set()``, histograms ``observe()``;
    ``value()`` reads a counter or gauge."""

    __slots__ = (
        "_family",
        "_handle",
        "_kind",
        "_labels",
        "_client",
        "_delta",
        "_set",
        "_obs",
        "_dirty",
        "__weakref__",
    )

    _family: MetricFamily
    _handle: int
    _kind: int
    _labels: dict[str, str]
    _client: Any
    _delta: float
    _set: float | None
    _obs: list[float]
    _dirty: bool

    def __init__(self) -> None:
        raise TypeError("metrics come from MetricFamily.Metric(labels, buckets)")

    @classmethod
    def _new(cls, family: MetricFamily, handle: int, labels: dict[str, str]) -> Metric:
        self = cls.__new__(cls)
        self._family = family  # the family lives as long as its metrics
        self._handle = handle
        self._kind = int(family._kind)
        self._labels = labels
        self._client = family._client
        self._delta = 0.0
        self._set = None
        self._obs = []
        self._dirty = False
        return self

    def _fail(self, action: str, why: str) -> TritonModelException:
        return TritonModelException(
            f"Failed to {action}: {_KIND_NAMES[self._kind]} '{self._family._name}' "
            f"{self._labels} {why} (model '{self._client.model_name()}')"
        )

    # increment/set/observe repeat their few locked lines instead of
    # sharing a helper: they are the hot path, a call per request or more.

    def increment(self, value: float) -> None:
        """Add ``value`` (counters: only non-negative values)."""
        v = float(value)
        kind = self._kind
        if kind == 2:
            raise self._fail(
                "increment metric value", "does not support increment(); use observe()"
            )
        if kind == 0 and v < 0.0:
            raise self._fail(
                "increment metric value", f"can only be incremented by non-negative values, got {v}"
            )
        c = self._client
        with c.lock:
            self._delta += v
            if not self._dirty:
                self._dirty = True
                c.dirty.append(self)
                if not c.scheduled:
                    c.schedule()

    def set(self, value: float) -> None:
        """Set a gauge to ``value``."""
        v = float(value)
        if self._kind != 1:
            raise self._fail("set metric value", "does not support set(); only gauges do")
        c = self._client
        with c.lock:
            self._set = v
            self._delta = 0.0
            if not self._dirty:
                self._dirty = True
                c.dirty.append(self)
                if not c.scheduled:
                    c.schedule()

    def observe(self, value: float) -> None:
        """Record one observation in a histogram."""
        v = float(value)
        if self._kind != 2:
            raise self._fail(
                "observe metric value", "does not support observe(); only histograms do"
            )
        c = self._client
        with c.lock:
            self._obs.append(v)
            if not self._dirty:
                self._dirty = True
                c.dirty.append(self)
                if not c.scheduled:
                    c.schedule()

    def value(self) -> float:
        """The current value of a counter or gauge, as the server has it
        (every earlier update of this stub included)."""
        if self._kind == 2:
            raise self._fail("get metric value", "does not support value()")
        return self._client.value(self._handle)

    def __del__(self) -> None:
        client = getattr(self, "_client", None)  # None: never fully made
        if client is not None:
            client.delete_metric(self._handle)

    def __repr__(self) -> str:
        return f"<Metric of {self._family!r} labels={self._labels}>"


def take_pending(metric: Metric) -> tuple[int, float | None, float, list[float]]:
    """For the stub, the host's metrics lock held: ``metric``'s handle and
    pending change (a value set or None, the summed increments, the
    observations), which starts again from nothing."""
    change = metric._handle, metric._set, metric._delta, metric._obs
    metric._dirty = False
    if metric._set is not None:
        metric._set = None
    if metric._delta:
        metric._delta = 0.0
    if metric._obs:
        metric._obs = []
    return change
