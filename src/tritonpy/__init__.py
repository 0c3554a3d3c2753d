# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""tritonpy: a fast Python backend for Triton Inference Server."""

__version__ = "0.1.0"
