// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// AdmissionGate: the hand-over of batches from Execute to the reader
// thread, and the bound on batches in flight that keeps requests in
// Triton's queue (backpressure).
//
// Every change of a batch's state before it ends goes through here, under
// the instance's mutex (the supervisor's), because the Execute thread
// waits on them:
//   Register (Execute)      -> kPending
//   TakePending (reader)    -> kExecuting
//   Returned (reader)       -> kReturned   wakes a sync Execute
//   Ended (reader)          -> kEnded      wakes an async Execute
// Bounds: an async instance keeps at most max_inflight_batches batches in
// flight; a sync one sends at most sync_prefetch_batches ahead of the one
// executing (and, past the first ahead, only below kAheadBytes of inputs),
// and waits for that room before Execute returns (AfterSend), so that
// Triton forms its next batch as late as it can be sent.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "instance/batch.h"
#include "ipc/channel.h"
#include "process/stub_supervisor.h"
#include "util/error.h"
#include "util/thread_annotations.h"

namespace tritonpy {

class AdmissionGate {
 public:
  // `describe`: "model 'm' instance 'i'", for messages.
  AdmissionGate(
      std::string describe, StubSupervisor* stub, uint32_t max_inflight,
      uint32_t prefetch, int restart_wait_s);

  // What the gate let a batch through to.
  struct Ticket {
    std::shared_ptr<Channel> channel;
    uint64_t generation = 0;
    bool async_execute = false;
  };
  // Execute thread. Waits out a restart in progress (spawn + HELLO + INIT,
  // at most restart_wait_s); then an async instance waits for room among
  // its batches in flight, a sync one (which AfterSend of its previous
  // batch let through) until at most `prefetch` batches are queued before
  // this one. UNAVAILABLE "<describe> is unavailable:
  // <why>" when the stub is not running or the instance stops.
  Status Admit(Ticket* ticket) EXCLUDES(stub_->mu);
  // Execute thread: hands `batch` to the reader (kPending) unless the stub
  // changed since Admit (then false: nobody will answer it).
  bool Register(
      const std::shared_ptr<Batch>& batch,
      const std::shared_ptr<Channel>& channel) EXCLUDES(stub_->mu);
  // Execute thread, after sending `batch`, before Execute returns: a sync
  // instance waits until its stub has room for the next batch ahead
  // (`prefetch` 0: until the model's execute() returned for `batch`, or
  // the stub went away). An async instance does not wait here.
  void AfterSend(const Batch& batch) EXCLUDES(stub_->mu);

  // Reader thread: the batches registered since the last call, now
  // kExecuting.
  void TakePending(std::vector<std::shared_ptr<Batch>>* adopted)
      EXCLUDES(stub_->mu);
  // Reader thread: the model's execute() returned for `batch` (or the stub
  // went away): kReturned.
  void Returned(Batch* batch) EXCLUDES(stub_->mu);
  // Reader thread: every request of `batch` is complete: kEnded.
  void Ended(Batch* batch) EXCLUDES(stub_->mu);

  size_t pending_count() EXCLUDES(stub_->mu);

 private:
  // A sync instance whose stub has more than `prefetch` batches queued
  // sends the next one when it is down to this many executing: half the
  // batches sent ahead, so that Execute sleeps and wakes once per few
  // batches instead of once per batch, while the stub still has work.
  static uint32_t ResumeAt(uint32_t prefetch)
  {
    return prefetch <= 1 ? prefetch : prefetch / 2;
  }
  // Arena bytes of inputs that batches sent ahead may hold: past the first
  // batch ahead, a sync instance sends more only below this, so that deep
  // prefetching of small requests does not become hundreds of MiB of
  // shared memory for large ones.
  static constexpr uint64_t kAheadBytes = 16ull << 20;
  // Whether a sync instance may send a batch with at most `limit` batches
  // executing (the one running and those queued behind it).
  bool RoomAheadLocked(uint32_t limit) const REQUIRES(stub_->mu)
  {
    return executing_batches_ <= limit &&
           (executing_batches_ < 2 || executing_bytes_ < kAheadBytes);
  }
  void ReturnedLocked(Batch* batch) REQUIRES(stub_->mu);
  // Sync instance: waits until a batch may be sent ahead (RoomAheadLocked,
  // refilled from ResumeAt) or the stub stops serving.
  void WaitRoomAheadLocked() REQUIRES(stub_->mu);

  const std::string describe_;
  StubSupervisor* const stub_;
  const uint32_t max_inflight_;
  const uint32_t prefetch_;
  const int restart_wait_s_;

  // Registered by Execute, not yet adopted by the reader.
  std::vector<std::shared_ptr<Batch>> pending_ GUARDED_BY(stub_->mu);
  // Batches registered and not ended.
  uint32_t inflight_batches_ GUARDED_BY(stub_->mu) = 0;
  // Batches registered whose execute() has not returned yet, and the arena
  // bytes of their inputs.
  uint32_t executing_batches_ GUARDED_BY(stub_->mu) = 0;
  uint64_t executing_bytes_ GUARDED_BY(stub_->mu) = 0;
};

}  // namespace tritonpy
