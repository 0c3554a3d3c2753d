# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""pb_utils.Logger: messages that land in Triton's log, with the model's
file and line, honouring the server's log settings."""

from __future__ import annotations

import enum
import sys

from . import _host, _text

__all__ = ["LogLevel", "Logger"]


class LogLevel(enum.IntEnum):
    """Values of TRITONSERVER_LogLevel."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


# Bit n set: level n is enabled. In a stub, the host's log_levels (kept
# equal to Triton's log settings); outside a stub, Triton's defaults, and
# the messages go to stderr, so models stay importable and testable anywhere.
_DEFAULT_LEVELS = 0b0111


def _emit(level: int, message: str, depth: int) -> None:
    # The message is checked first: the official binding refuses a
    # non-text message at a disabled level too.
    text = message if type(message) is str else _text.text(message)
    if text is None:
        raise TypeError(f"the log message must be a str, got {_text.describe(message)}")
    host = _host.attached()
    if not (_DEFAULT_LEVELS if host is None else host.log_levels) >> level & 1:
        return
    frame = sys._getframe(depth)
    file, line = frame.f_code.co_filename, frame.f_lineno
    if host is None:
        print(f"{LogLevel(level).name[0]} {file}:{line}] {text}", file=sys.stderr, flush=True)
    else:
        host.log(int(level), file, line, text)


_Level = LogLevel  # the type, for annotations inside Logger (which rebinds the name)


class Logger:
    """``pb_utils.Logger.log_info("...")`` and friends; safe from any thread.

    The levels are also reachable as ``Logger.INFO`` ... and
    ``Logger.LogLevel``, as in the official backend
    (``logger.log("...", logger.ERROR)``).
    """

    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: _Level = LogLevel.INFO) -> None:
        if not isinstance(level, LogLevel):
            # As the official binding: a level is a pb_utils.LogLevel.
            raise TypeError(f"level must be a pb_utils.LogLevel, got {type(level).__name__}")
        _emit(int(level), message, 2)

    @staticmethod
    def log_info(message: str) -> None:
        _emit(LogLevel.INFO, message, 2)

    @staticmethod
    def log_warn(message: str) -> None:
        _emit(LogLevel.WARNING, message, 2)

    @staticmethod
    def log_error(message: str) -> None:
        _emit(LogLevel.ERROR, message, 2)

    @staticmethod
    def log_verbose(message: str) -> None:
        _emit(LogLevel.VERBOSE, message, 2)
