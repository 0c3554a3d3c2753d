# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""plan.py's answers from a sync execute; the late ones from a thread."""

import threading
import time

import plan


def _later(fn):
    threading.Thread(target=lambda: (time.sleep(plan.LATER_S), fn()), daemon=True).start()


class TritonPythonModel:
    def execute(self, requests):
        return plan.execute(requests, _later)
