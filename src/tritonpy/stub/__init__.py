# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub process that runs a model instance (``python -m tritonpy.stub``)."""
