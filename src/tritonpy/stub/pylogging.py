# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Records of Python's ``logging`` module that no handler takes go to
Triton's log (docs/api.md, *Python's logging module*).

A model that logs with ``logging.getLogger(__name__).warning(...)`` and
configures nothing gets, on the official backend, the bare message on the
stub's stderr: Python hands such records to ``logging.lastResort``. The
stub puts its own handler there instead, so they become LOG frames (the
path of ``pb_utils.Logger``, with its rate limit) at the matching level,
naming the model and the instance. A model that configures logging itself
(``logging.basicConfig``, a handler on any logger its records pass) keeps
what it configured: Python then never asks ``lastResort``. The backend
setting ``stub-python-logging=false`` gives the official behaviour back.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonpy.stub.runtime import Stub

__all__ = ["TritonLogRoute"]

# TRITONSERVER_LogLevel values (pb_utils.LogLevel).
_INFO, _WARNING, _ERROR, _VERBOSE = 0, 1, 2, 3


def _triton_level(levelno: int) -> int:
    if levelno >= logging.ERROR:
        return _ERROR
    if levelno >= logging.WARNING:
        return _WARNING
    if levelno >= logging.INFO:
        return _INFO
    return _VERBOSE


class TritonLogRoute(logging.Handler):
    """The stub's ``logging.lastResort``. It has no level of its own: a
    record the model's logger let through (``setLevel(logging.INFO)``)
    is logged, and Triton's log settings decide what shows."""

    def __init__(self, stub: Stub) -> None:
        super().__init__(logging.NOTSET)
        self._stub = stub
        self._previous: logging.Handler | None = None
        self._installed = False

    def install(self) -> TritonLogRoute:
        if not self._installed:
            self._previous, logging.lastResort = logging.lastResort, self
            self._installed = True
        return self

    def uninstall(self) -> None:
        if self._installed and logging.lastResort is self:
            logging.lastResort = self._previous
        self._installed = False

    def emit(self, record: logging.LogRecord) -> None:
        stub = self._stub
        try:
            text = self.format(record)
            level = _triton_level(record.levelno)
            if not stub.host.log_levels >> level & 1:
                return
            if stub.channel.closed:  # leaving: the stderr the official writes to
                sys.stderr.write(text + "\n")
                return
            stub.log(
                level,
                f"model '{stub.model_name}' instance '{stub.instance}': {record.name}: {text}",
                record.pathname,
                record.lineno,
            )
        except Exception:  # noqa: BLE001 - logging must never raise into model code
            self.handleError(record)
