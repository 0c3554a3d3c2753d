# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Named like the standard library's wave: must not hide it."""

SHADOW = True
