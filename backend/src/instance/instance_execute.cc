// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// InstanceState::Execute: from Triton's requests to a batch in flight.
// Once Execute is entered the backend owns every request: each one gets
// its final response (from the reader thread, or here as an error),
// statistics and a release, on every path. Requests that never reach the
// stub are finished here; the others belong to the reader thread from the
// moment the batch is registered.

#include <chrono>

#include "instance/execute_builder.h"
#include "instance/instance_state.h"
#include "instance/response_writer.h"
#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"
#include "util/barrier.h"
#include "util/clock.h"

namespace tritonpy {

void
InstanceState::FinishLocally(Batch* batch)
{
  const uint64_t now = NowNs();
  if (batch->compute_start_ns == 0) batch->compute_start_ns = now;
  batch->compute_end_ns = now;
  for (BatchRequest& req : batch->requests) {
    if (req.complete()) continue;
    RespondWithError(
        &req, Status::Internal(
                  "tritonpy: model '" + model_->name() + "': request '" +
                  req.id + "' was not executed"));
    FinishRequest(
        instance_, model_->name(), *batch, &req,
        TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  ReportBatchStatistics(instance_, *batch, now);
  arenas_.Free(batch);
}

void
InstanceState::Execute(TRITONBACKEND_Request** requests, uint32_t count)
{
  std::shared_ptr<Batch> batch;
  bool registered = false;
  const Status status = Guarded("execute", [&] {
    ExecuteBatch(requests, count, &batch, &registered);
    return Status();
  });
  if (!status.ok()) {
    FailExecute(requests, count, batch.get(), registered, status);
  }
}

void
InstanceState::FailExecute(
    TRITONBACKEND_Request** requests, uint32_t count, Batch* batch,
    bool registered, const Status& status) noexcept
{
  const Status failed = Guarded("execute", [&] {
    TRITONPY_LOG_ERROR("tritonpy: " + Describe() + ": " + status.message());
    if (registered) {
      // The reader owns the batch: a stub that cannot be told of it fails
      // it, as when the send fails.
      std::shared_ptr<Channel> channel = stub_.CurrentChannel();
      if (channel != nullptr) channel->Shutdown();
      return Status();
    }
    Batch local;
    if (batch == nullptr || batch->requests.size() != count) {
      // Nothing answered yet: every request is still as Triton gave it.
      local.exec_start_ns = NowNs();
      local.requests.resize(count);
      for (uint32_t i = 0; i < count; ++i) {
        local.requests[i].request = requests[i];
      }
      batch = &local;
    }
    for (uint32_t i = 0; i < count; ++i) {
      BatchRequest& req = batch->requests[i];
      if (req.complete()) continue;
      // Requests are read in Triton's order: one not reached yet.
      if (req.request == nullptr) req.request = requests[i];
      RespondWithError(&req, status);
    }
    FinishLocally(batch);
    return Status();
  });
  if (!failed.ok()) {
    // Past a second failure nothing can be done for these requests safely.
    TRITONPY_LOG_ERROR(
        "tritonpy: " + Describe() +
        ": a batch could not be failed cleanly: " + failed.message());
  }
}

void
InstanceState::ExecuteBatch(
    TRITONBACKEND_Request** requests, uint32_t count,
    std::shared_ptr<Batch>* out, bool* registered)
{
  *out = std::make_shared<Batch>();
  std::shared_ptr<Batch>& batch = *out;
  batch->exec_start_ns = NowNs();
  batch->id = next_batch_id_++;
  batch->decoupled = model_->decoupled();

  AdmissionGate::Ticket admitted;
  Status status = gate_.Admit(&admitted);
  const std::shared_ptr<Channel>& channel = admitted.channel;
  const bool async_execute = admitted.async_execute;
  batch->sync_execute = !async_execute;
  if (!status.ok()) {
    batch->requests.resize(count);
    for (uint32_t i = 0; i < count; ++i) {
      batch->requests[i].request = requests[i];
      const char* id = nullptr;
      TRITONSERVER_Error* err = TRITONBACKEND_RequestId(requests[i], &id);
      if (err != nullptr) TRITONSERVER_ErrorDelete(err);
      batch->requests[i].id = id != nullptr ? id : "";
      RespondWithError(&batch->requests[i], status);
    }
    FinishLocally(batch.get());
    return;
  }

  std::vector<uint8_t>& frame = execute_frame_;
  if (frame.capacity() > kKeptFrameBytes) std::vector<uint8_t>().swap(frame);
  struct Announce {
    uint32_t id;
    uint64_t size;
    int fd;
  };
  std::vector<Announce> announce;
  {
    MutexLock lock(&arenas_.mu);
    // A restarted stub knows none of our arenas.
    if (admitted.generation != arenas_.announced_generation) {
      arenas_.allocator.MarkAllUnannounced();
      arenas_.announced_generation = admitted.generation;
    }
    status = BuildExecute(
        *model_, requests, count, &arenas_.allocator, batch.get(), &frame);
    for (const MappedArena* arena : arenas_.allocator.Unannounced()) {
      announce.push_back({arena->id(), arena->size(), arena->fd()});
    }
  }
  // Sent without arenas_.mu held: a send may block, and the reader frees
  // batch space under that mutex. Arenas live as long as the allocator.
  for (const Announce& a : announce) {
    if (!status.ok()) break;
    status = channel->Send(proto::ArenaFrame({a.id, a.size}), a.fd);
    if (status.ok()) {
      MutexLock lock(&arenas_.mu);
      arenas_.allocator.MarkAnnounced(a.id);
    }
  }
  // Requests that could not be read already have their error response.
  for (BatchRequest& req : batch->requests) {
    if (!req.responded()) continue;
    FinishRequest(
        instance_, model_->name(), *batch, &req,
        TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  if (!status.ok() || batch->wire_index.empty()) {
    for (BatchRequest& req : batch->requests) {
      if (!req.complete()) RespondWithError(&req, status);
    }
    FinishLocally(batch.get());
    return;
  }

  InjectFault(model_->name(), "execute");
  batch->open = batch->wire_index.size();
  for (const Allocation& a : batch->allocations) batch->arena_bytes += a.size;
  batch->compute_start_ns = NowNs();
  *registered = gate_.Register(batch, channel);
  if (!*registered) {
    for (BatchRequest& req : batch->requests) {
      RespondWithError(
          &req, Status::Unavailable(
                    "tritonpy: " + Describe() + " is unavailable: the stub " +
                    "died"));
    }
    FinishLocally(batch.get());
    return;
  }
  // An idle reader of an async instance blocks for up to a second; it must
  // be woken so that it polls cancellation of the new batch. A sync
  // instance's idle reader blocks at most InstanceReader::kSyncIdlePollMs and
  // adopts the batch anyway when the stub's frames arrive: no wake-up per
  // batch.
  if (async_execute) reader_.WakeIfIdle();
  log_levels_.Sync(channel.get());  // the batch's logs obey the settings of now
  if (!channel->Send(frame).ok()) {
    // The stub is gone or the socket is broken: EOF makes the reader
    // handle it as a death, which fails this batch with the reason.
    channel->Shutdown();
  }
  // Waits for room ahead, or with sync_prefetch_batches 0 until the model's
  // execute returned, as the official backend does (admission_gate.h).
  gate_.AfterSend(*batch);
}

}  // namespace tritonpy
