# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Logs one line per level, and prints one, in each phase of its life
(initialize, execute, finalize), each tagged "log_phases <phase> <level>";
answers IN as OUT."""

import triton_python_backend_utils as pb_utils


def log_all(phase: str) -> None:
    logger = pb_utils.Logger
    logger.log(f"log_phases {phase} log", logger.INFO)
    logger.log_info(f"log_phases {phase} info")
    logger.log_warn(f"log_phases {phase} warning")
    logger.log_error(f"log_phases {phase} error")
    logger.log_verbose(f"log_phases {phase} verbose")
    print(f"log_phases {phase} print", flush=True)


class TritonPythonModel:
    def initialize(self, args):
        log_all("initialize")

    def execute(self, requests):
        log_all("execute")
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]
            )
            for r in requests
        ]

    def finalize(self):
        log_all("finalize")
