# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A module that makes the stub template that imports it die right after
each clone, before it answers the backend (Python's at-fork hook runs in
the template once the child exists): the backend must exec that stub with
descriptors of its own, and the child the template left must never run
(test_template_rules.py)."""

import os
import signal

os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGKILL))
