// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// InstanceState: one model instance = one stub process, one socket, one
// reader thread.
//
// Threads:
//  - Triton's threads call Create, Execute and the destructor (never two
//    at once for one instance).
//  - The reader thread owns the socket's read side, the stub process and
//    the peer (stub) arenas. It answers requests as RESPONSES arrive, ends
//    batches, and restarts the stub when it dies.
// mu_ guards the fields marked below; frames are written through
// Channel::Send, which has its own lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "arena.h"
#include "batch.h"
#include "channel.h"
#include "error.h"
#include "model_state.h"
#include "protocol.h"
#include "stub_process.h"
#include "tritonpy/triton_api.h"

namespace tritonpy {

class InstanceState {
 public:
  // Starts the stub (HELLO, INIT, INIT_DONE) and the reader thread.
  static Status Create(ModelState* model, TRITONBACKEND_ModelInstance* instance,
                       std::unique_ptr<InstanceState>* out);
  // Sends FINALIZE, waits for the stub to exit (bounded), joins the reader.
  ~InstanceState();

  // Runs one batch; returns when every request has its final response and
  // has been released (Triton's execute contract, success path).
  void Execute(TRITONBACKEND_Request** requests, uint32_t count);

 private:
  enum class StubState { kReady, kRestarting, kDown, kStopped };

  InstanceState(ModelState* model, TRITONBACKEND_ModelInstance* instance);

  // Spawns a stub and runs the handshake. On success the process and
  // channel are returned; on failure the process has been reaped.
  Status StartStub(std::unique_ptr<StubProcess>* process,
                   std::shared_ptr<Channel>* channel);
  Status Handshake(StubProcess* process, Channel* channel);
  // Waits for a frame of type `want` (a JSON frame), handling LOG/ERROR/
  // ARENA meanwhile. timeout_ms < 0: no deadline.
  Status AwaitJson(Channel* channel, proto::FrameType want, int timeout_ms,
                   std::string* json);
  std::string StartFailure(StubProcess* process, const std::string& why);

  void ReaderLoop();
  // Handles one received message; a failed Status is a protocol violation.
  Status Dispatch(const uint8_t* msg, size_t len, std::vector<int>* fds);
  // Frames valid at any time: LOG, ERROR, ARENA. Sets *handled.
  Status HandleCommon(const proto::FrameView& f, const uint8_t* body,
                      std::vector<int>* fds, bool* handled);
  Status ResolveBody(const proto::FrameView& f, const uint8_t** body);
  Batch* CurrentBatch(uint64_t id);
  void EndBatch(Batch* batch, const Status& status);
  // The stub is gone (EOF, error, violation): reap it, fail the batch,
  // restart unless shutting down. Returns false when the reader must exit.
  bool OnStubGone(const std::string& why, bool violation);
  void SendError(Channel* channel, const std::string& message);

  // Execute helpers (instance_execute.cc).
  void FailAll(Batch* batch, const Status& status);
  void FinishBatch(Batch* batch, uint64_t exec_start, uint64_t compute_start,
                   uint64_t compute_end);
  std::string Describe() const;  // "model 'm' instance 'i'"

  ModelState* model_;
  TRITONBACKEND_ModelInstance* instance_;
  std::string name_;
  std::string kind_;
  int32_t device_id_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  StubState state_ = StubState::kStopped;  // guarded by mu_
  std::string down_reason_;                // guarded by mu_
  std::shared_ptr<Channel> channel_;       // guarded by mu_
  pid_t pid_ = -1;                         // guarded by mu_
  uint64_t generation_ = 0;                // guarded by mu_; +1 per stub
  Batch* current_batch_ = nullptr;         // guarded by mu_
  bool shutting_down_ = false;             // guarded by mu_
  bool finalize_done_ = false;             // guarded by mu_
  std::string finalize_error_;             // guarded by mu_

  // Reader thread only (or the creating thread before it starts).
  std::unique_ptr<StubProcess> process_;
  PeerArenas peers_;
  std::vector<uint8_t> recv_buf_;
  std::thread reader_;
  std::chrono::steady_clock::time_point stub_started_;
  int restart_backoff_ms_ = 100;

  // Execute thread only.
  ArenaAllocator allocator_;
  uint64_t announced_generation_ = 0;
  uint64_t next_batch_id_ = 1;
};

}  // namespace tritonpy
