# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Imports a module two levels up, through the version directory's package."""

from .. import origin


def two_up() -> str:
    return origin.WHERE
