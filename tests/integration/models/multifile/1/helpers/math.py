# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
FACTOR = 3


def scale(x):
    return x * FACTOR
