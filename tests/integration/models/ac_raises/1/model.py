# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""auto_complete_config raises: the load fails with the exception."""


def read_header():
    raise RuntimeError("cannot read the weights header to size the inputs")


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        read_header()
        return auto_complete_model_config

    def execute(self, requests):
        return []
