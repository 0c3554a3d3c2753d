# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What a hostile model can do from inside its stub: write frames of its
own making to the backend through the stub's socket, bypassing the stub.

Hostile test models import this module (tests/ is on their path through
TRITONPY_TESTS_DIR, which tests/integration/conftest.py sets for the
servers it starts) and forge frames with the reference codec,
tests/protocol_ref.py. The backend must treat each of them as a protocol
violation of that stub alone: kill it, fail its requests naming what it
broke, restart it, and serve every other model on.
"""

from __future__ import annotations

import array
import os
import socket
from collections.abc import Sequence

import protocol_ref as ref

__all__ = ["STUB_FD", "ref", "send", "stub_socket"]


STUB_FD = 3  # the stub's end of the socket (docs/protocol.md, Transport)


def stub_socket() -> socket.socket:
    """The stub's socket to the backend (a duplicate: closing it leaves the
    stub's own descriptor open)."""
    return socket.socket(fileno=os.dup(STUB_FD))


def send(frame: bytes, fds: Sequence[int] = ()) -> None:
    """Writes one frame (and descriptors, as SCM_RIGHTS) to the backend."""
    with stub_socket() as s:
        ancillary = []
        if fds:
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        s.sendmsg([frame], ancillary)
