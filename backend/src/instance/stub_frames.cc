// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/stub_frames.h"

#include <unistd.h>

#include <algorithm>

#include "ipc/fd_closer.h"
#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"

namespace tritonpy {

void
CloseAll(std::vector<int>* fds)
{
  // (A socket's close may block: CloseReceived hands it to the closer.)
  for (int fd : *fds) CloseReceived(fd);
  fds->clear();
}

Status
ResolvePeerBody(
    const proto::FrameView& f, const PeerArenas& peers, const uint8_t** body)
{
  if (!f.body_in_arena) {
    *body = f.body;
    return Status();
  }
  // The decoders' counts are bounded by the body: this bounds the body
  // (an inline one is bounded by MAX_FRAME).
  if (f.body_len > peers.limits().max_body_bytes) {
    return Violation(
        std::string("a ") + proto::FrameTypeName(f.type) + " body of " +
        std::to_string(f.body_len) +
        " bytes in a stub arena is larger than stub-max-body-bytes=" +
        std::to_string(peers.limits().max_body_bytes));
  }
  return peers.Resolve(
      f.body_ref.arena_id, f.body_ref.offset, f.body_len, body);
}

Status
AddPeerArena(
    const proto::FrameView& f, const uint8_t* body, std::vector<int>* fds,
    PeerArenas* peers)
{
  if (fds->size() != 1) {
    return Violation(
        "an ARENA frame must carry exactly one descriptor, got " +
        std::to_string(fds->size()));
  }
  proto::ArenaBody a;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeArena(body, f.body_len, &a));
  const int fd = (*fds)[0];
  fds->clear();
  return peers->Add(a.arena_id, fd, a.size);  // closes fd
}

void
SendError(Channel* channel, const std::string& message)
{
  // Best effort: the peer may be gone.
  (void)channel->Send(proto::ErrorFrame(message));
}

void
SendRelease(Channel* channel, const std::vector<proto::ArenaRef>& release)
{
  if (channel == nullptr) return;
  // As many frames as the list needs: the count, then one entry each.
  constexpr size_t kPerFrame =
      (proto::kMaxFrame - proto::kHeaderSize - proto::kReleaseMinSize) /
      proto::kAllocationSize;
  for (size_t at = 0; at < release.size(); at += kPerFrame) {
    proto::ReleaseBody body;
    body.allocations.assign(
        release.begin() + at,
        release.begin() + std::min(release.size(), at + kPerFrame));
    (void)channel->Send(proto::ReleaseFrame(body));
  }
}

void
LogLevelSync::Sync(Channel* channel)
{
  const uint32_t enabled = EnabledLogLevels();
  if (enabled == sent_.load(std::memory_order_relaxed)) return;
  MutexLock lock(&mu_);
  if (enabled == sent_.load()) return;
  if (channel->Send(proto::LogLevelsFrame(enabled)).ok()) {
    sent_.store(enabled);
  }
}

void
LogLevelSync::Reset()
{
  sent_.store(kUnsent);
}

StubFrames::StubFrames(
    std::string describe, InstanceMetrics* metrics, StubSupervisor* stub,
    const StubLimits& limits)
    : describe_(std::move(describe)),
      metrics_(metrics),
      stub_(stub),
      peers_(limits),
      log_limiter_(limits.log_bytes_per_second)
{
}

Status
StubFrames::ResolveBody(const proto::FrameView& f, const uint8_t** body)
{
  return ResolvePeerBody(f, peers_, body);
}

Status
StubFrames::HandleCommon(
    const proto::FrameView& f, const uint8_t* body, std::vector<int>* fds,
    Channel* channel, bool* handled)
{
  *handled = true;
  switch (f.type) {
    case proto::FrameType::kArena:
      return AddPeerArena(f, body, fds, &peers_);
    case proto::FrameType::kLog: {
      proto::LogBody log;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeLog(body, f.body_len, &log));
      TRITONSERVER_LogLevel level =
          log.level <= 3 ? static_cast<TRITONSERVER_LogLevel>(log.level)
                         : TRITONSERVER_LOG_INFO;
      std::string dropped;
      const bool pass = log_limiter_.Admit(
          log.message.size() + log.file.size(), LogLimiter::Clock::now(),
          &dropped);
      if (!dropped.empty()) {
        TRITONPY_LOG_WARN("tritonpy: " + describe_ + ": " + dropped);
      }
      if (pass) {
        LogAt(level, log.file.c_str(), static_cast<int>(log.line), log.message);
      }
      ReleaseBody(f, channel);
      return Status();
    }
    case proto::FrameType::kMetric: {
      if (f.body_in_arena) return Violation("a METRIC body must be inline");
      std::shared_ptr<Channel> current;
      if (channel == nullptr) {
        current = stub_->CurrentChannel();
        channel = current.get();
      }
      return metrics_->OnFrame(f, body, channel);
    }
    case proto::FrameType::kError: {
      proto::ErrorBody e;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeError(body, f.body_len, &e));
      TRITONPY_LOG_ERROR(
          "tritonpy: stub for " + describe_ + " reported: " + e.message);
      ReleaseBody(f, channel);
      return Status();
    }
    default:
      *handled = false;
      return Status();
  }
}

void
StubFrames::ReleaseBody(const proto::FrameView& f, Channel* channel)
{
  if (!f.body_in_arena) return;
  std::shared_ptr<Channel> current;
  if (channel == nullptr) {
    current = stub_->CurrentChannel();
    channel = current.get();
  }
  SendRelease(channel, {f.body_ref});
}

void
StubFrames::Clear()
{
  peers_.Clear();
  metrics_->Clear();
  const std::string dropped = log_limiter_.Flush();
  if (!dropped.empty()) {
    TRITONPY_LOG_WARN("tritonpy: " + describe_ + ": " + dropped);
  }
}

}  // namespace tritonpy
