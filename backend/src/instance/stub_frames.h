// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// What passes between the backend and any stub at any time, whoever reads
// the socket (the creating thread during the first handshake, then the
// reader): the frames valid in every phase (LOG, ERROR, ARENA, METRIC),
// the stub's arenas, LOG_LEVELS, ERROR and RELEASE.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "ipc/arena.h"
#include "ipc/channel.h"
#include "process/stub_supervisor.h"
#include "protocol/protocol.h"
#include "triton/metrics.h"
#include "util/error.h"
#include "util/log_limiter.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace tritonpy {

// Closes the descriptors a frame carried (those nobody took).
void CloseAll(std::vector<int>* fds);
// The body of `f` from a peer whose arenas are `peers`: inline, or in one
// of those arenas (at most stub-max-body-bytes).
Status ResolvePeerBody(
    const proto::FrameView& f, const PeerArenas& peers, const uint8_t** body);
// An ARENA frame: maps the one descriptor it carried (taken from `fds`)
// into `peers`.
Status AddPeerArena(
    const proto::FrameView& f, const uint8_t* body, std::vector<int>* fds,
    PeerArenas* peers);
// Sends an ERROR frame (best effort: the peer may be gone).
void SendError(Channel* channel, const std::string& message);
// Gives the stub back arena space of frames this side is done with.
void SendRelease(Channel* channel, const std::vector<proto::ArenaRef>& release);

// Keeps a stub told of Triton's log settings (EnabledLogLevels). Any
// thread: before each batch, at idle polls, before INIT and FINALIZE.
class LogLevelSync {
 public:
  // A new stub knows nothing of the log settings.
  void Reset();
  // Sends LOG_LEVELS when the settings differ from what the stub was last
  // told; a few loads when they do not.
  void Sync(Channel* channel) EXCLUDES(mu_);

 private:
  static constexpr uint32_t kUnsent = ~0u;
  // LOG_LEVELS bits the current stub was last sent (kUnsent: none).
  std::atomic<uint32_t> sent_{kUnsent};
  Mutex mu_;  // serialises the senders of LOG_LEVELS
};

// The stub's side of shared memory and the frames valid at any time.
// Reader thread (or the creating thread before the reader starts).
class StubFrames {
 public:
  StubFrames(
      std::string describe, InstanceMetrics* metrics, StubSupervisor* stub,
      const StubLimits& limits);

  // The body of `f`: inline, or in one of the stub's arenas (at most
  // stub-max-body-bytes).
  Status ResolveBody(const proto::FrameView& f, const uint8_t** body);
  // LOG, ERROR, ARENA (takes its descriptor from `fds`), METRIC; sets
  // *handled. `channel`: where to answer (null: the current stub's). LOG
  // lines past stub-log-bytes-per-second are dropped and counted.
  Status HandleCommon(
      const proto::FrameView& f, const uint8_t* body, std::vector<int>* fds,
      Channel* channel, bool* handled);
  // Gives the stub back the arena body of `f`, if it had one, once it is
  // decoded (`channel` null: the current stub's).
  void ReleaseBody(const proto::FrameView& f, Channel* channel);
  // Forgets the stub's arenas and metrics (it went away, or never
  // finished starting), and logs the LOG lines it dropped.
  void Clear();

  const PeerArenas& peers() const { return peers_; }

 private:
  const std::string describe_;
  InstanceMetrics* const metrics_;
  StubSupervisor* const stub_;
  PeerArenas peers_;
  LogLimiter log_limiter_;
};

}  // namespace tritonpy
