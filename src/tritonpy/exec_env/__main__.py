# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""``python -m tritonpy.exec_env``: run by the backend when a model loads."""

import sys

from . import main

sys.exit(main())
