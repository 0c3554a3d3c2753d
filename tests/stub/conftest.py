# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The fixture of the stub tests; their helpers are in host.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from host import StubHost


@pytest.fixture
def host() -> Iterator[StubHost]:
    """A real stub on a socket pair, closed afterwards."""
    h = StubHost()
    try:
        yield h
    finally:
        h.close()
