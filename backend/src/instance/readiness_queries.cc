// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/readiness_queries.h"

#include <chrono>
#include <memory>

#include "ipc/channel.h"
#include "protocol/protocol_frames.h"
#include "util/clock.h"
#include "util/json.h"

namespace tritonpy {

namespace {

// The official backend's texts (TRITONBACKEND_ModelInstanceReady and its
// wait for is_ready()); tritonpy's detail follows them.
std::string
NotHealthy(const std::string& instance)
{
  return "Stub process '" + instance + "' is not healthy. ";
}
constexpr char kGoneWhileAsked[] =
    "Stub process is not healthy while waiting for user-defined is_ready() "
    "response. ";
constexpr char kTimedOut[] =
    "Timed out waiting for user-defined is_ready() response. ";

}  // namespace

ReadinessQueries::ReadinessQueries(
    std::string describe, std::string instance, StubSupervisor* stub,
    double timeout_s)
    : describe_(std::move(describe)),
      instance_(std::move(instance)),
      stub_(stub),
      timeout_s_(timeout_s)
{
}

void
ReadinessQueries::OnAnswer(uint64_t query_id, const proto::ReadyBody& answer)
{
  MutexLock lock(&stub_->mu);
  if (queries_.count(query_id) == 0) return;
  answers_[query_id] = answer;
  stub_->cv.NotifyAll();
}

Status
ReadinessQueries::Check()
{
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(1000 * timeout_s_));
  std::shared_ptr<Channel> channel;
  uint64_t query_id = 0;
  uint64_t generation = 0;
  {
    MutexLock lock(&stub_->mu);
    if (!stub_->serving()) {
      return Status::Unavailable(
          NotHealthy(instance_) + "tritonpy: " + describe_ + " is not ready: " +
          stub_->UnavailableReason("the stub is restarting"));
    }
    if (!stub_->traits().has_is_ready) return Status();
    channel = stub_->channel();
    generation = stub_->generation();
    query_id = next_query_id_++;
    queries_.insert(query_id);
  }
  Status sent = channel->Send(proto::IsReadyFrame(query_id));
  MutexLock lock(&stub_->mu);
  auto gone = [&]() REQUIRES(stub_->mu) {
    return stub_->generation() != generation ||
           stub_->state() != StubState::kReady;
  };
  if (sent.ok()) {
    const auto deadline = Clock::now() + timeout;
    while (answers_.count(query_id) == 0 && !gone() &&
           stub_->cv.WaitUntil(deadline)) {}
  }
  queries_.erase(query_id);
  auto it = answers_.find(query_id);
  if (it == answers_.end()) {
    if (!sent.ok() || gone()) {
      return Status::Unavailable(
          kGoneWhileAsked + std::string("tritonpy: ") + describe_ +
          " is not ready: the stub went away during the readiness check");
    }
    return Status::Unavailable(
        kTimedOut + std::string("tritonpy: ") + describe_ +
        " is not ready: is_ready() did not answer within " +
        json::FormatNumber(timeout_s_) + " s (ready-timeout-seconds)");
  }
  proto::ReadyBody answer = it->second;
  answers_.erase(it);
  if (answer.ready != 0) return Status();
  return Status::Unavailable(
      "tritonpy: " + describe_ + " is not ready" +
      (answer.message.empty() ? std::string() : ": " + answer.message));
}

}  // namespace tritonpy
