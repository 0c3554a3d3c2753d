# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Custom metrics: ``MetricFamily`` and its ``Metric`` objects, shown at
Triton's metrics endpoint (``:8002/metrics``).

Every call waits for the server, as on the official backend: when
``increment()``, ``set()`` or ``observe()`` returns, the change is in
Triton's registry, so the model's own scrape of the metrics endpoint right
after sees it (docs/protocol.md, *Custom metrics*; what it costs:
docs/performance.md). Misuse (``set()`` on a counter ...) raises at the
call, before anything is sent.

Families and metrics are deleted from the server when their Python objects
are collected, and all of them when the model is unloaded or its stub
dies. A ``Metric`` does not keep its ``MetricFamily`` alive: once the
family is collected, its metrics are deleted too and every operation on
them raises, as on the official backend.
"""

from __future__ import annotations

import enum
import weakref
from typing import Any

from . import _host
from ._errors import TritonModelException
from ._text import text

__all__ = ["MetricKind", "MetricFamily", "Metric"]


class MetricKind(enum.IntEnum):
    """Values of TRITONSERVER_MetricKind."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


_KIND_NAMES = ("counter", "gauge", "histogram")

# The official backend's text (clients and QA compare it); tritonpy's
# detail follows it.
FAMILY_DELETED = (
    "Invalid metric operation as the corresponding 'MetricFamily' has been deleted. "
    "The 'MetricFamily' object should be deleted AFTER its corresponding 'Metric' "
    "objects have been deleted."
)


def _need_client() -> _host.Metrics:
    return _host.need("custom metrics need a running tritonpy stub").metrics


class MetricFamily:
    """A named metric of one kind; ``Metric(labels)`` adds one labelled series.

    ``kind`` is ``MetricFamily.COUNTER``, ``.GAUGE`` or ``.HISTOGRAM``.
    Families of the same name and kind share their series within one model
    (its instances included), as in the official backend. Across models
    tritonpy differs on purpose: a series belongs to the model that created
    it, and another model's ``Metric`` with the same labels raises ("... a
    model cannot use another model's series"); a family name another model
    registered with another description is refused (docs/hardening.md,
    *Custom metrics*).
    """

    __slots__ = (
        "_name",
        "_description",
        "_kind",
        "_handle",
        "_client",
        "_metrics",
        "__weakref__",
    )

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        self._handle = 0
        self._metrics: weakref.WeakSet[Metric] = weakref.WeakSet()
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
        plain: dict[str, str] = {}
        for key, value in labels.items():
            # numpy.str_ keys and values as plain str: the wire takes str only
            if not isinstance(key, str) or not isinstance(value, str):
                raise TritonModelException(
                    f"Failed to create metric of {what}: labels must map str to str, "
                    f"got {key!r}: {value!r}"
                )
            plain[str(key)] = str(value)
        labels = plain
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
        metric = Metric._new(self, handle, dict(labels))
        self._metrics.add(metric)
        return metric

    def __del__(self) -> None:
        if self._handle:
            # Its metrics go first (the official backend deletes them with
            # their family); a later use of one raises FAMILY_DELETED.
            for metric in list(self._metrics):
                metric._clear()
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

    __slots__ = ("_name", "_handle", "_kind", "_labels", "_client", "_cleared", "__weakref__")

    _name: str  # the family's
    _handle: int
    _kind: int
    _labels: dict[str, str]
    _client: Any
    _cleared: bool

    def __init__(self) -> None:
        raise TypeError("metrics come from MetricFamily.Metric(labels, buckets)")

    @classmethod
    def _new(cls, family: MetricFamily, handle: int, labels: dict[str, str]) -> Metric:
        self = cls.__new__(cls)
        self._name = family._name
        self._handle = handle
        self._kind = int(family._kind)
        self._labels = labels
        self._client = family._client
        self._cleared = False
        return self

    def _clear(self) -> None:
        """Its family is being deleted: delete it on the server now."""
        if not self._cleared:
            self._cleared = True
            self._client.delete_metric(self._handle)

    def _fail(self, action: str, why: str) -> TritonModelException:
        return TritonModelException(
            f"Failed to {action}: {_KIND_NAMES[self._kind]} '{self._name}' "
            f"{self._labels} {why} (model '{self._client.model_name()}')"
        )

    def _check_live(self, action: str) -> None:
        if self._cleared:
            raise TritonModelException(
                f"Failed to {action}: {FAMILY_DELETED} (tritonpy: "
                f"{_KIND_NAMES[self._kind]} '{self._name}' {self._labels}, "
                f"model '{self._client.model_name()}')"
            )

    def increment(self, value: float) -> None:
        """Add ``value`` (counters: only non-negative values)."""
        v = float(value)
        kind = self._kind
        if kind == 2:
            raise self._fail(
                "increment metric value", "does not support increment(); use observe()"
            )
        self._check_live("increment metric value")
        if kind == 0 and v < 0.0:
            raise self._fail(
                "increment metric value", f"can only be incremented by non-negative values, got {v}"
            )
        self._client.increment(self._handle, v)

    def set(self, value: float) -> None:
        """Set a gauge to ``value``."""
        v = float(value)
        if self._kind != 1:
            raise self._fail("set metric value", "does not support set(); only gauges do")
        self._check_live("set metric value")
        self._client.set(self._handle, v)

    def observe(self, value: float) -> None:
        """Record one observation in a histogram."""
        v = float(value)
        if self._kind != 2:
            raise self._fail(
                "observe metric value", "does not support observe(); only histograms do"
            )
        self._check_live("observe metric value")
        self._client.observe(self._handle, v)

    def value(self) -> float:
        """The current value of a counter or gauge, as the server has it."""
        if self._kind == 2:
            raise self._fail("get metric value", "does not support value()")
        self._check_live("get metric value")
        return self._client.value(self._handle)

    def __del__(self) -> None:
        if getattr(self, "_cleared", True) is False:  # made, and not cleared by its family
            self._cleared = True
            self._client.delete_metric(self._handle)

    def __repr__(self) -> str:
        return f"<Metric of {_KIND_NAMES[self._kind]} family {self._name!r} labels={self._labels}>"
