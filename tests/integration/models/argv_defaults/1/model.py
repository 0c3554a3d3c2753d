# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Reads the command line as QA models of the official backend do:
argparse with defaults in initialize, unittest.main() in execute. Both
parse sys.argv, which must hold no options of the stub."""

import argparse
import json
import sys
import unittest

import numpy as np
import triton_python_backend_utils as pb_utils


class CommandLine(unittest.TestCase):
    def test_argv_is_the_official_one(self):
        self.assertEqual(sys.argv, [""])


class TritonPythonModel:
    def initialize(self, args):
        parser = argparse.ArgumentParser(description="options with defaults only")
        parser.add_argument("--repeat", type=int, default=2)
        self.options = parser.parse_args()

    def execute(self, requests):
        # "model": this file, imported again by its plain name.
        run = unittest.main("model", exit=False)
        info = {
            "argv": sys.argv,
            "repeat": self.options.repeat,
            "tests_run": run.result.testsRun,
            "passed": run.result.wasSuccessful(),
        }
        out = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
