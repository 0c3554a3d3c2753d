# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""execute() raises, from a helper so that the traceback has two frames of
the model's own."""


def refuse():
    raise ValueError("execute refused on purpose (sync)")


class TritonPythonModel:
    def execute(self, requests):
        refuse()
