# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
import sys

from bench.run import main

sys.exit(main())
