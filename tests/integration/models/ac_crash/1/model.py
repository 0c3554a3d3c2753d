# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub dies inside auto_complete_config: the load fails, naming the
exit status."""

import os


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        os._exit(3)

    def execute(self, requests):
        return []
