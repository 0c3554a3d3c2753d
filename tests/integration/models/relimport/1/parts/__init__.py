# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A subpackage of the version directory."""

from .inner import two_up


def label() -> str:
    return f"parts of {two_up()}"
