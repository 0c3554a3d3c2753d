// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// What the reader checks between frames besides the batches themselves
// (those are BatchTable's): unloads (DRAIN, and the grace running out),
// the execute timeout; and the readiness query.

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

void
InstanceState::OnReady(uint64_t query_id, const proto::ReadyBody& answer)
{
  MutexLock lock(&stub_.mu);
  // Answers to queries that timed out are dropped.
  if (ready_queries_.count(query_id) == 0) return;
  ready_answers_[query_id] = answer;
  stub_.cv.NotifyAll();
}

Status
InstanceState::CheckReady()
{
  const double timeout_s = model_->backend().settings().ready_timeout_seconds;
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(1000 * timeout_s));
  std::shared_ptr<Channel> channel;
  uint64_t query_id = 0;
  uint64_t generation = 0;
  {
    MutexLock lock(&stub_.mu);
    if (!stub_.serving()) {
      return Status::Unavailable(
          "tritonpy: " + Describe() + " is not ready: " +
          stub_.UnavailableReason("the stub is restarting"));
    }
    if (!stub_.traits().has_is_ready) return Status();
    channel = stub_.channel();
    generation = stub_.generation();
    query_id = next_query_id_++;
    ready_queries_.insert(query_id);
  }
  auto frame = proto::MakeFrame(
      proto::FrameType::kIsReady, 0, query_id, [](std::vector<uint8_t>*) {});
  Status sent = channel->Send(frame);
  MutexLock lock(&stub_.mu);
  auto gone = [&]() REQUIRES(stub_.mu) {
    return stub_.generation() != generation ||
           stub_.state() != StubState::kReady;
  };
  if (sent.ok()) {
    const auto deadline = Clock::now() + timeout;
    while (ready_answers_.count(query_id) == 0 && !gone() &&
           stub_.cv.WaitUntil(deadline)) {}
  }
  ready_queries_.erase(query_id);
  auto it = ready_answers_.find(query_id);
  if (it == ready_answers_.end()) {
    std::string why = !sent.ok() || gone()
                          ? "the stub went away during the readiness check"
                          : "is_ready() did not answer within " +
                                json::FormatNumber(timeout_s) +
                                " s (ready-timeout-seconds)";
    return Status::Unavailable(
        "tritonpy: " + Describe() + " is not ready: " + why);
  }
  proto::ReadyBody answer = it->second;
  ready_answers_.erase(it);
  if (answer.ready != 0) return Status();
  return Status::Unavailable(
      "tritonpy: " + Describe() + " is not ready" +
      (answer.message.empty() ? std::string() : ": " + answer.message));
}

}  // namespace tritonpy
