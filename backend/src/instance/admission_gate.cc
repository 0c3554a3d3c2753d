// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/admission_gate.h"

#include <chrono>
#include <utility>

#include "triton/triton_util.h"
#include "util/clock.h"

namespace tritonpy {

AdmissionGate::AdmissionGate(
    std::string describe, StubSupervisor* stub, uint32_t max_inflight,
    uint32_t prefetch, int restart_wait_s)
    : describe_(std::move(describe)),
      stub_(stub),
      max_inflight_(max_inflight),
      prefetch_(prefetch),
      restart_wait_s_(restart_wait_s)
{
}

Status
AdmissionGate::Admit(Ticket* ticket)
{
  MutexLock lock(&stub_->mu);
  const auto restart_deadline =
      Clock::now() + std::chrono::seconds(restart_wait_s_);
  while (stub_->state() == StubState::kRestarting &&
         stub_->cv.WaitUntil(restart_deadline)) {}
  if (stub_->state() == StubState::kReady && !stub_->traits().async_execute) {
    // Normally AfterSend of the previous batch made room already.
    WaitRoomAheadLocked();
  } else if (stub_->state() == StubState::kReady) {
    while (inflight_batches_ >= max_inflight_ && stub_->serving()) {
      stub_->cv.Wait();
    }
  }
  if (!stub_->serving()) {
    const std::string why =
        stub_->shutting_down()
            ? "the model is being unloaded"
            : stub_->UnavailableReason("the stub is still restarting");
    return Status::Unavailable(
        "tritonpy: " + describe_ + " is unavailable: " + why);
  }
  ticket->channel = stub_->channel();
  ticket->generation = stub_->generation();
  ticket->async_execute = stub_->traits().async_execute;
  return Status();
}

bool
AdmissionGate::Register(
    const std::shared_ptr<Batch>& batch,
    const std::shared_ptr<Channel>& channel)
{
  MutexLock lock(&stub_->mu);
  // A stub that went away since Admit takes nothing more.
  if (!stub_->serving() || stub_->channel() != channel) return false;
  batch->state = BatchState::kPending;
  pending_.push_back(batch);
  ++inflight_batches_;
  ++executing_batches_;
  executing_bytes_ += batch->arena_bytes;
  return true;
}

void
AdmissionGate::WaitRoomAheadLocked()
{
  if (RoomAheadLocked(prefetch_)) return;
  if (TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_VERBOSE)) {
    TRITONPY_LOG_VERBOSE(
        "tritonpy: " + describe_ + ": Execute waits for room ahead (" +
        std::to_string(executing_batches_) + " batches, " +
        std::to_string(executing_bytes_) + " arena bytes sent ahead)");
  }
  // Full: refill once the stub is down to half the batches sent ahead, so
  // that this thread sleeps and wakes once per few batches instead of once
  // per batch (see ResumeAt).
  while (!RoomAheadLocked(ResumeAt(prefetch_)) && stub_->serving()) {
    stub_->cv.Wait();
  }
}

void
AdmissionGate::AfterSend(const Batch& batch)
{
  if (!batch.sync_execute) return;
  MutexLock lock(&stub_->mu);
  if (prefetch_ == 0) {
    while (batch.state < BatchState::kReturned) stub_->cv.Wait();
    return;
  }
  // Waiting here rather than before the next batch is read is what keeps
  // Triton's dynamic batcher forming that batch late: it forms it when
  // Execute returns, so a batch formed as the one ahead starts holds the
  // requests that came in meanwhile, where one formed as soon as this one
  // was sent would hold only those of that instant and then wait.
  WaitRoomAheadLocked();
}

void
AdmissionGate::TakePending(std::vector<std::shared_ptr<Batch>>* adopted)
{
  MutexLock lock(&stub_->mu);
  if (pending_.empty()) return;
  adopted->swap(pending_);
  for (auto& batch : *adopted) batch->state = BatchState::kExecuting;
}

void
AdmissionGate::ReturnedLocked(Batch* batch)
{
  if (batch->state >= BatchState::kReturned) return;
  batch->state = BatchState::kReturned;
  --executing_batches_;
  executing_bytes_ -= batch->arena_bytes;
  // A sync instance's Execute waits for the low-water mark (or, with no
  // batch sent ahead, for its own batch to return): waking it at every
  // returned batch would cost a futex wake here and a sleep there per
  // batch. An async instance's Execute is woken by Ended.
  if (!stub_->traits().async_execute && RoomAheadLocked(ResumeAt(prefetch_))) {
    stub_->cv.NotifyAll();
  }
}

void
AdmissionGate::Returned(Batch* batch)
{
  MutexLock lock(&stub_->mu);
  ReturnedLocked(batch);
}

void
AdmissionGate::Ended(Batch* batch)
{
  MutexLock lock(&stub_->mu);
  --inflight_batches_;
  // An async instance's Execute waits for room among its batches in
  // flight.
  if (stub_->traits().async_execute) stub_->cv.NotifyAll();
  ReturnedLocked(batch);
  batch->state = BatchState::kEnded;
}

size_t
AdmissionGate::pending_count()
{
  MutexLock lock(&stub_->mu);
  return pending_.size();
}

}  // namespace tritonpy
