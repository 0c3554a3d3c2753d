// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Auto-complete: the model's `TritonPythonModel.auto_complete_config`, run
// in a stub while Triton initializes the model (AUTO_COMPLETE /
// AUTO_COMPLETE_DONE in docs/protocol.md). The stub outlives the call: the
// model keeps it for its first instance, which sends it INIT.
#pragma once

#include <memory>
#include <string>

#include "ipc/channel.h"
#include "process/stub_process.h"
#include "triton_c_api/triton_api.h"
#include "util/error.h"

namespace tritonpy {

// A stub that has sent HELLO and waits for its next frame.
struct StartedStub {
  std::unique_ptr<StubProcess> process;
  std::shared_ptr<Channel> channel;
};

struct AutoCompleteCall {
  std::string model_name;
  // The name of the instance the stub will most likely serve (only for
  // its command line and messages until INIT names the instance).
  std::string instance_name;
  std::string config_json;  // the config Triton has so far (version 1)
  std::string model_file;
  std::string model_dir;
  StubLaunch launch;  // the model's interpreter and environment
  int stub_timeout_seconds = 30;
  uint64_t stub_send_queue_bytes = Channel::kDefaultSendQueueBytes;
  bool python_logging = true;  // stub-python-logging
};

// Starts a stub, sends it AUTO_COMPLETE and waits for AUTO_COMPLETE_DONE
// (for HELLO at most stub_timeout_seconds; for the answer as long as the
// model's import and auto_complete_config take, or until the stub dies).
// On success *completed is the completed config JSON, or empty when the
// model defines no auto_complete_config, and *stub is ready for INIT. On
// failure the stub has been stopped and the message names the model.
Status RunAutoComplete(
    const AutoCompleteCall& call, std::string* completed, StartedStub* stub);

// Hands a completed config to Triton (TRITONBACKEND_ModelSetConfig,
// version 1); Triton's refusal comes back naming the model.
Status ApplyCompletedConfig(
    TRITONBACKEND_Model* model, const std::string& model_name,
    const std::string& config_json);

// Ends a stub nobody will use: EOF (it exits 0), a short wait, SIGKILL.
// Returns how it ended ("exited with status 0"), or "" if it had.
std::string StopStub(StartedStub* stub);

}  // namespace tritonpy
