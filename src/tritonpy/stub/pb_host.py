# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub's side of the seam with pb_utils: ``PbHost`` implements
pb_utils' ``Host`` (pb_utils/_host.py) with the stub's own parts, and is
registered once (pb_utils/_seam.pyx), when the stub starts, before any
model code runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tritonpy.pb_utils._seam import TritonModelException, register

if TYPE_CHECKING:
    from tritonpy.pb_utils._seam import Arenas, Bls, Metrics, Responses

# TritonLog.log: (level, message, file, line).
LogFn = Callable[[int, str, str, int], None]

_LOG_DEFAULT = 0b0111  # Triton's defaults: INFO, WARNING, ERROR


class PbHost:
    """What pb_utils asks of this stub. The parts are the stub's objects
    themselves (no wrappers between a model's call and the work)."""

    __slots__ = (
        "responses",
        "bls",
        "metrics",
        "arenas",
        "log_levels",
        "_log",
        "_model_dir",
        "_no_model_dir",
    )

    def __init__(
        self, responses: Responses, bls: Bls, metrics: Metrics, arenas: Arenas, log: LogFn
    ) -> None:
        self.responses = responses
        self.bls = bls
        self.metrics = metrics
        self.arenas = arenas
        self.log_levels = _LOG_DEFAULT  # LOG_LEVELS frames update it
        self._log = log
        # The model's version directory, or None and the reason it is not known.
        self._model_dir: str | None = None
        self._no_model_dir = "tritonpy: the model directory is not known before INIT"

    def log(self, level: int, file: str, line: int, message: str) -> None:
        self._log(level, message, file, line)

    def model_dir(self) -> str:
        if self._model_dir is None:
            raise TritonModelException(self._no_model_dir)
        return self._model_dir

    def set_model_dir(self, path: str | None, why_unknown: str = "") -> None:
        """What get_model_dir() answers: ``path``, or (None) an error
        saying ``why_unknown``."""
        self._model_dir = path
        self._no_model_dir = why_unknown

    def attach(self) -> PbHost:
        register(self)
        return self
