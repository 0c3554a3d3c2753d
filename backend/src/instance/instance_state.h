// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// InstanceState: one model instance = one stub process, one socket, one
// reader thread, any number of batches in flight. It owns the parts
// below and wires them together; each part's header says which thread
// uses it and what guards it.
//
// Threads:
//  - Triton's threads call Create, Execute, CheckReady and the destructor
//    (Execute never twice at once for one instance).
//  - The reader thread (InstanceReader, instance_reader.h) owns the
//    socket's read side, the peer (stub) arenas and every batch once it is
//    registered: it answers requests as RESPONSES arrive, polls
//    cancellation, ends batches, fails them when the stub dies, and has
//    the StubSupervisor (stub_supervisor.h) reap and restart the stub.
// The supervisor's mutex (stub_.mu) is the instance's one mutex. Frames
// are written from any thread through Channel::Send, which serialises
// writers with its own mutex.
//
// Execute modes (INIT_DONE "execute"):
//  - sync: Execute returns when the batch ends (default mode) or when the
//    stub says execute returned (decoupled mode);
//  - async: Execute returns once the EXECUTE frame is sent, unless
//    max_inflight_batches batches are in flight; then it waits for one to
//    end (backpressure keeps requests in Triton's queue).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bls/bls.h"
#include "instance/admission_gate.h"
#include "instance/batch.h"
#include "instance/batch_arenas.h"
#include "instance/batch_table.h"
#include "instance/fork_channels.h"
#include "instance/instance_reader.h"
#include "instance/readiness_queries.h"
#include "instance/stub_frames.h"
#include "instance/stub_starter.h"
#include "ipc/arena.h"
#include "ipc/channel.h"
#include "model/drain_watcher.h"
#include "model/model_state.h"
#include "process/memory_reporter.h"
#include "process/stub_process.h"
#include "process/stub_supervisor.h"
#include "protocol/protocol.h"
#include "triton/metrics.h"
#include "triton_c_api/triton_api.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace tritonpy {

class InstanceState {
 public:
  // Starts the stub (HELLO, INIT, INIT_DONE) and the reader thread.
  static Status Create(
      ModelState* model, TRITONBACKEND_ModelInstance* instance,
      std::unique_ptr<InstanceState>* out);
  // Sends FINALIZE and waits (finalize-grace-seconds + stub-timeout-seconds)
  // for FINALIZE_DONE and the stub's exit, then kills it; fails every
  // request still open; joins the reader.
  ~InstanceState();

  // Takes ownership of `requests` (Triton's execute contract: every
  // request gets its responses, statistics and release on every path).
  // An exception on the way fails the batch (barrier.h).
  void Execute(TRITONBACKEND_Request** requests, uint32_t count);

  // Readiness of the instance: OK when the stub runs and, if the model
  // defines is_ready(), that answered true within ready-timeout-seconds;
  // else UNAVAILABLE with the reason. Behind TRITONBACKEND_ModelInstanceReady,
  // which Triton cores newer than 2.51 call (2.51 never does).
  Status CheckReady() { return readiness_.Check(); }

 private:
  InstanceState(
      ModelState* model, TRITONBACKEND_ModelInstance* instance,
      std::string name, std::string kind, int32_t device_id,
      TRITONSERVER_Server* server);

  // Execute helpers (instance_execute.cc).
  // Execute's body. `*batch` is the batch as far as it got; `*registered`
  // is set once the reader owns it.
  void ExecuteBatch(
      TRITONBACKEND_Request** requests, uint32_t count,
      std::shared_ptr<Batch>* batch, bool* registered);
  // Execute's barrier: the body threw `status`. Answers and releases every
  // request the batch did not finish, or, once the reader owns the batch,
  // shuts the socket down so that the reader fails it with the stub.
  void FailExecute(
      TRITONBACKEND_Request** requests, uint32_t count, Batch* batch,
      bool registered, const Status& status) noexcept;
  // Reports statistics and releases the requests of a batch that never
  // reached the stub (Execute thread), freeing its arena space.
  void FinishLocally(Batch* batch);
  std::string Describe() const;  // "model 'm' instance 'i'"
  // Registers each stub of the instance with the backend's MemoryReporter
  // while it runs. Before the first Start.
  void WatchStubMemory();

  ModelState* model_;
  TRITONBACKEND_ModelInstance* instance_;
  const std::string name_;
  const std::string kind_;
  const int32_t device_id_;

  // What the stub can map of the backend's arenas, BLS and batch ones
  // together (arena.h); null: no limit.
  const std::shared_ptr<ArenaRoom> arena_room_;
  // What the stub and the processes it forked hold together (the caps').
  const std::shared_ptr<StubUsage> usage_;
  // BLS calls and model control (bls.h); frames from the reader thread
  // (and the creating thread during the first handshake).
  std::unique_ptr<Bls> bls_;
  // The BLS channels of processes the stub forked (reader thread).
  std::unique_ptr<ForkChannels> forks_;
  // The stub's custom metrics: used by whoever reads the socket.
  std::unique_ptr<InstanceMetrics> metrics_;
  // The stub's arenas and the frames valid at any time (whoever reads the
  // socket).
  StubFrames frames_;
  // Keeps the stub told of Triton's log settings (any thread).
  LogLevelSync log_levels_;
  // Spawn and handshake, for the supervisor.
  StubStarter starter_;
  // The stub process and its state; stub_.mu is the instance's mutex.
  StubSupervisor stub_;
  // Execute's admission and the hand-over of batches to the reader.
  AdmissionGate gate_;
  // Backend arenas of batch inputs: allocated by Execute, freed by
  // whoever ends a batch.
  BatchArenas arenas_;
  // The batches in flight (reader thread only).
  BatchTable table_;
  // IS_READY queries (Triton's threads) and their answers (the reader).
  ReadinessQueries readiness_;
  // The socket's receive buffer: the starter's handshakes, then the reader.
  std::vector<uint8_t> recv_buf_;
  // Shared with the backend's DrainWatcher (see drain_watcher.h).
  std::shared_ptr<DrainTarget> drain_ = std::make_shared<DrainTarget>();
  // The running stub's registration for the memory metrics (set and
  // reset by the supervisor's pid observer).
  MemoryReporter::Registration memory_;
  // The reader thread; declared last: it uses every part above.
  InstanceReader reader_;

  // Execute thread only.
  uint64_t next_batch_id_ = 1;
  // The EXECUTE frame being built, kept from batch to batch so that its
  // buffer is not allocated and grown again for each (a large one's is
  // given back, see kKeptFrameBytes).
  std::vector<uint8_t> execute_frame_;
  static constexpr size_t kKeptFrameBytes = 64 << 10;
};

}  // namespace tritonpy
