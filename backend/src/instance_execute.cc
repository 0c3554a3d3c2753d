// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// InstanceState::Execute and its helpers: one batch from Triton's requests
// to released requests. Once Execute is entered the backend owns every
// request: each one gets exactly one final response (from the reader
// thread, or here as an error), statistics, and a release, on every path.

#include <chrono>

#include "execute_builder.h"
#include "instance_state.h"
#include "response_writer.h"
#include "triton_util.h"

namespace tritonpy {

namespace {

uint64_t
NowNs()
{
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

void
InstanceState::FailAll(Batch* batch, const Status& status)
{
  for (BatchRequest& req : batch->requests) RespondWithError(&req, status);
}

void
InstanceState::FinishBatch(Batch* batch, uint64_t exec_start,
                           uint64_t compute_start, uint64_t compute_end)
{
  for (BatchRequest& req : batch->requests) {
    if (req.responded) continue;
    if (!batch->end_status.ok()) {
      RespondWithError(&req, batch->end_status);
    } else {
      RespondWithError(
          &req, Status::Internal(
                    "tritonpy: model '" + model_->name() +
                    "' ended the batch without a response for request '" +
                    req.id + "'"));
    }
  }
  uint64_t exec_end = NowNs();
  uint64_t total_batch_size = 0;
  for (BatchRequest& req : batch->requests) {
    total_batch_size += req.batch_size;
    TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceReportStatistics(
        instance_, req.request, req.success, exec_start, compute_start,
        compute_end, exec_end);
    if (err != nullptr) {
      TRITONPY_LOG_ERROR(
          std::string("tritonpy: reporting request statistics failed: ") +
          TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
    }
  }
  if (!batch->requests.empty()) {
    TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceReportBatchStatistics(
        instance_, total_batch_size, exec_start, compute_start, compute_end,
        exec_end);
    if (err != nullptr) {
      TRITONPY_LOG_ERROR(
          std::string("tritonpy: reporting batch statistics failed: ") +
          TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
    }
  }
  for (BatchRequest& req : batch->requests) {
    TRITONSERVER_Error* err =
        TRITONBACKEND_RequestRelease(req.request, TRITONSERVER_REQUEST_RELEASE_ALL);
    if (err != nullptr) {
      TRITONPY_LOG_ERROR(
          std::string("tritonpy: releasing a request failed: ") +
          TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
    }
  }
  for (const Allocation& a : batch->allocations) {
    allocator_.Free(a.arena_id, a.offset);
  }
  batch->allocations.clear();
}

void
InstanceState::Execute(TRITONBACKEND_Request** requests, uint32_t count)
{
  const uint64_t exec_start = NowNs();
  const int timeout_s = model_->backend().settings().stub_timeout_seconds;
  Batch batch;
  batch.id = next_batch_id_++;

  // Wait out a restart in progress (spawn + HELLO + INIT), bounded.
  std::shared_ptr<Channel> channel;
  uint64_t generation = 0;
  Status status;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(2 * timeout_s),
                 [&] { return state_ != StubState::kRestarting; });
    if (state_ == StubState::kReady) {
      channel = channel_;
      generation = generation_;
    } else {
      std::string why = state_ == StubState::kRestarting
                            ? "the stub is still restarting"
                        : down_reason_.empty() ? "the stub is not running"
                                               : down_reason_;
      status = Status::Unavailable(
          "tritonpy: " + Describe() + " is unavailable: " + why);
    }
  }
  if (!status.ok()) {
    batch.requests.resize(count);
    for (uint32_t i = 0; i < count; ++i) {
      batch.requests[i].request = requests[i];
      const char* id = nullptr;
      TRITONSERVER_Error* err = TRITONBACKEND_RequestId(requests[i], &id);
      if (err != nullptr) TRITONSERVER_ErrorDelete(err);
      batch.requests[i].id = id != nullptr ? id : "";
    }
    FailAll(&batch, status);
    FinishBatch(&batch, exec_start, exec_start, exec_start);
    return;
  }

  // A restarted stub knows none of our arenas.
  if (generation != announced_generation_) {
    allocator_.MarkAllUnannounced();
    announced_generation_ = generation;
  }
  std::vector<uint8_t> frame;
  status = BuildExecute(*model_, requests, count, &allocator_, &batch, &frame);
  if (!status.ok() || batch.wire_index.empty()) {
    if (!status.ok()) FailAll(&batch, status);
    uint64_t now = NowNs();
    FinishBatch(&batch, exec_start, now, now);
    return;
  }

  for (const MappedArena* arena : allocator_.Unannounced()) {
    auto announce = proto::MakeFrame(
        proto::FrameType::kArena, 0, 0, [&](std::vector<uint8_t>* out) {
          proto::EncodeArena({arena->id(), arena->size()}, out);
        });
    status = channel->Send(announce, arena->fd());
    if (!status.ok()) break;
    allocator_.MarkAnnounced(arena->id());
  }

  const uint64_t compute_start = NowNs();
  bool registered = false;
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == StubState::kReady && channel_ == channel) {
      current_batch_ = &batch;
      registered = true;
    } else {
      status = Status::Unavailable(
          "tritonpy: " + Describe() + " is unavailable: the stub died");
    }
  }
  if (registered) {
    if (!channel->Send(frame).ok()) {
      // The stub is gone or the socket is broken: EOF makes the reader
      // handle it as a death, which ends this batch with the reason.
      channel->Shutdown();
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return batch.ended; });
    current_batch_ = nullptr;
  } else {
    channel->Shutdown();
    FailAll(&batch, status);
  }
  FinishBatch(&batch, exec_start, compute_start, NowNs());
}

}  // namespace tritonpy
