// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// StubStarter: brings one stub up for an instance: spawns it (or takes
// the one the model kept from auto-complete), then HELLO, INIT and
// INIT_DONE (docs/protocol.md). The StubSupervisor calls Start for the
// first stub (creating thread) and for every restart (reader thread);
// never two at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bls/bls.h"
#include "instance/stub_frames.h"
#include "ipc/channel.h"
#include "model/model_state.h"
#include "process/stub_process.h"
#include "process/stub_supervisor.h"
#include "protocol/protocol.h"
#include "util/error.h"

namespace tritonpy {

class StubStarter {
 public:
  // `describe`: "model 'm' instance 'i'". The pointers outlive the
  // starter's use (the instance's members).
  StubStarter(
      ModelState* model, std::string name, std::string kind, int32_t device_id,
      std::string describe, StubFrames* frames, Bls* bls,
      LogLevelSync* log_levels, StubSupervisor* stub,
      std::vector<uint8_t>* buf);

  // On success the process, its channel and what INIT_DONE said; on
  // failure the process has been reaped and what it created forgotten.
  Status Start(
      std::unique_ptr<StubProcess>* process, std::shared_ptr<Channel>* channel,
      StubTraits* traits);

 private:
  // HELLO (unless `greeted`: the stub already sent it), INIT, INIT_DONE.
  Status Handshake(
      StubProcess* process, const std::shared_ptr<Channel>& channel,
      bool greeted, StubTraits* traits);
  // Waits for a frame of type `want` (a JSON frame), handling LOG/ERROR/
  // ARENA/METRIC and MODEL_CONTROL (the model loading API works in
  // initialize()) meanwhile. timeout_ms < 0: no deadline.
  Status AwaitJson(
      const std::shared_ptr<Channel>& channel, proto::FrameType want,
      int timeout_ms, std::string* json);
  std::string StartFailure(StubProcess* process, const std::string& why);

  ModelState* const model_;
  const std::string name_;
  const std::string kind_;
  const int32_t device_id_;
  const std::string describe_;
  StubFrames* const frames_;
  Bls* const bls_;
  LogLevelSync* const log_levels_;
  StubSupervisor* const stub_;
  // The reader's receive buffer: starting happens before the reader
  // runs, or on the reader thread.
  std::vector<uint8_t>* const buf_;
};

}  // namespace tritonpy
