# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A plain module beside model.py, imported by name."""

WHERE = "shadow_names"
