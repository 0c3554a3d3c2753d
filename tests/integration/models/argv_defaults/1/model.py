# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Reads the command line as QA models of the official backend do:
argparse with defaults in initialize, unittest.main() in execute. Both
parse sys.argv, which must hold no options of the stub. The tests that
unittest.main() finds also check which exception wrong arguments raise."""

import argparse
import json
import sys
import unittest

import numpy as np
import triton_python_backend_utils as pb_utils


class CommandLine(unittest.TestCase):
    def test_argv_is_the_official_one(self):
        self.assertEqual(sys.argv, [""])


class ArgumentTypes(unittest.TestCase):
    """Which exception a wrong argument raises, as the official API does:
    a value of the wrong type is a TypeError, a list holding a non-Tensor a
    TritonModelException."""

    def test_tensor(self):
        with self.assertRaises(TypeError):
            pb_utils.Tensor(None, np.zeros(2, np.int32))
        with self.assertRaises(TypeError):
            pb_utils.Tensor("", None)
        with self.assertRaises(pb_utils.TritonModelException):
            pb_utils.Tensor.from_dlpack("X", None)

    def test_request_and_response(self):
        with self.assertRaises(pb_utils.TritonModelException):
            pb_utils.InferenceRequest(model_name="m", inputs=[None], requested_output_names=[])
        with self.assertRaises(TypeError):
            pb_utils.InferenceRequest(model_name="m", inputs=None, requested_output_names=[])
        with self.assertRaises(pb_utils.TritonModelException):
            pb_utils.InferenceResponse(output_tensors=[None])
        with self.assertRaises(TypeError):
            pb_utils.InferenceResponse(output_tensors=None)
        pb_utils.InferenceResponse()  # left out is fine

    def test_logger(self):
        for level in (1, None):
            with self.assertRaises(TypeError):
                pb_utils.Logger.log("a level that is not a LogLevel", level)
        with self.assertRaises(TypeError):
            pb_utils.Logger.log_info(None)


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
