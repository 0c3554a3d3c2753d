# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Lines for Triton's log: ``TritonLog`` sends them as LOG frames, from any
thread; ``TritonLogRoute`` hands it the records of Python's ``logging``
module that no handler takes (docs/api.md, *Python's logging module*).

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
    from tritonpy.stub._channel import Channel
    from tritonpy.stub.names import ModelNames
    from tritonpy.stub.outbound import Outbound
    from tritonpy.stub.pb_host import PbHost
    from tritonpy.stub.turns import Turns

__all__ = ["TritonLog", "TritonLogRoute"]

# TRITONSERVER_LogLevel values (pb_utils.LogLevel).
_INFO, _WARNING, _ERROR, _VERBOSE = 0, 1, 2, 3


class TritonLog:
    """The stub's logger: ``log`` makes a LOG frame, on any thread, and it
    is sent where the channel may be used (stub/turns.py)."""

    __slots__ = ("_turns", "_out")

    def __init__(self, turns: Turns, out: Outbound) -> None:
        self._turns = turns
        self._out = out

    def log(self, level: int, message: str, file: str = "", line: int = 0) -> None:
        out = self._out
        self._turns.run(out.send_text, out.log_frame(level, file or "tritonpy/stub", line, message))


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

    def __init__(self, log: TritonLog, host: PbHost, channel: Channel, names: ModelNames) -> None:
        super().__init__(logging.NOTSET)
        self._log = log
        self._host = host  # its log_levels: what Triton's log settings let through
        self._channel = channel
        self._names = names
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
        try:
            text = self.format(record)
            level = _triton_level(record.levelno)
            if not self._host.log_levels >> level & 1:
                return
            if self._channel.closed:  # leaving: the stderr the official writes to
                sys.stderr.write(text + "\n")
                return
            names = self._names
            self._log.log(
                level,
                f"model '{names.model}' instance '{names.instance}': {record.name}: {text}",
                record.pathname,
                record.lineno,
            )
        except Exception:  # noqa: BLE001 - logging must never raise into model code
            self.handleError(record)
