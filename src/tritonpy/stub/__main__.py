# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
import sys

from tritonpy.stub.main import main

sys.exit(main())
