# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A module that starts a thread when imported, named "preload-thread" for
the kernel (comm): a stub template must refuse to fork after importing it
(test_stub_fork.py)."""

import ctypes
import threading

_named = threading.Event()
_never = threading.Event()


def _run() -> None:
    ctypes.CDLL(None).prctl(15, b"preload-thread", 0, 0, 0)  # PR_SET_NAME
    _named.set()
    _never.wait()


threading.Thread(target=_run, daemon=True).start()
_named.wait()
