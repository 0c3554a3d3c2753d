# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The tritonpy benchmark suite: tritonpy, the official Python backend and a
native floor, side by side in the same tritonserver. Run ``make bench`` or
``python -m bench --help``."""
