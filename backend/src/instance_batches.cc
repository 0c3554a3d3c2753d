// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// What the reader checks between frames besides the batches themselves
// (those are BatchTable's): unloads (DRAIN, and the grace running out),
// the execute timeout.

#include <algorithm>
#include <chrono>

#include "clock.h"
#include "instance_state.h"
#include "json.h"
#include "response_writer.h"
#include "triton_util.h"

namespace tritonpy {

namespace {

// How long past finalize-grace-seconds a draining stub may keep requests.
constexpr int64_t kDrainSlackMs = 2000;

}  // namespace

void
InstanceState::PollUnload()
{
  drain_->open_requests.store(table_.open_requests());
  if (table_.open_requests() == 0) {
    drain_sent_ = false;  // a later unload with new work drains again
    drain_->unloading.store(false);
    return;
  }
  if (drain_sent_ || !drain_->unloading.load()) return;
  std::shared_ptr<Channel> channel = stub_.CurrentChannel();
  if (channel == nullptr) return;
  TRITONPY_LOG_INFO(
      "tritonpy: " + Describe() + " is being unloaded with " +
      std::to_string(table_.open_requests()) +
      " request(s) in flight; they get finalize-grace-seconds to finish");
  auto frame = proto::MakeFrame(
      proto::FrameType::kDrain, 0, 0, [](std::vector<uint8_t>*) {});
  (void)channel->Send(frame);  // a failed send means the stub is gone: EOF
  drain_sent_ = true;
  drain_sent_at_ = Clock::now();
}

std::string
InstanceState::OverDeadline(bool* unloading)
{
  *unloading = false;
  if (table_.open_requests() == 0) return "";
  const auto now = Clock::now();
  if (drain_sent_) {
    // The stub answers every open request itself once the grace is over;
    // one that cannot (stuck in a sync execute) is killed a little later.
    const double grace = model_->backend().settings().finalize_grace_seconds;
    if (now - drain_sent_at_ >
        std::chrono::milliseconds(
            static_cast<int64_t>(1000 * grace) + kDrainSlackMs)) {
      *unloading = true;
      return "it kept " + std::to_string(table_.open_requests()) +
             " request(s) after the unload's finalize-grace-seconds (" +
             json::FormatNumber(grace) + " s)";
    }
  }
  return table_.OverExecuteTimeout();
}

}  // namespace tritonpy
