// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Execution environments: the model parameter EXECUTION_ENV_PATH names a
// Python installation (a directory, or a tar archive of one such as
// conda-pack output) whose interpreter runs the model's stubs. The work is
// done by `<python-executable> -m tritonpy.exec_env` (src/tritonpy/exec_env/):
// it resolves $$TRITON_MODEL_DIRECTORY, unpacks an archive into the private
// cache (env-cache-dir) refusing members that would land outside it,
// sources the environment's bin/activate, and checks that the interpreter
// can run tritonpy. The backend turns its answer (the interpreter, the
// variables to set and to drop, LD_LIBRARY_PATH with the environment's lib/
// first among them) into the StubLaunch of the model. The helper runs in the
// model's stub sandbox (launch->sandbox, set before) with the environment of
// stub-env-allowlist, and gives the environment's interpreter
// stub-timeout-seconds to answer.
#pragma once

#include <string>

#include "model/backend_state.h"
#include "process/stub_launch.h"
#include "util/error.h"

namespace tritonpy {

// Prepares the environment `value` (the parameter's text) of model `model`,
// whose directory is `model_dir`, and fills *launch. Blocks while an
// archive is unpacked: once per archive content, later loads reuse it. As
// the official backend, logs "Extracting Python execution env <real path>"
// (verbose) when this process first sees an archive and when its
// modification time changed. The error names the model and what is wrong (the
// archive member, the missing interpreter ...). Call once per model load, from
// the loading thread.
Status PrepareExecutionEnv(
    const BackendSettings& settings, const std::string& model,
    const std::string& model_dir, const std::string& value, StubLaunch* launch);

}  // namespace tritonpy
