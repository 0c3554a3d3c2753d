# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Parses the command line for an option nobody passes: argparse exits
(SystemExit 2) in initialize, which must fail the load, not hang it."""

import argparse


class TritonPythonModel:
    def initialize(self, args):
        parser = argparse.ArgumentParser()
        parser.add_argument("--weights", required=True)
        parser.parse_args()

    def execute(self, requests):
        raise AssertionError("never loaded")
