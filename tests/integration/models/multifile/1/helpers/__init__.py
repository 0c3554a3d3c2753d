# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
from .math import scale  # noqa: F401
