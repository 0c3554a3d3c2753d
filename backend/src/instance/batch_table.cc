// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/batch_table.h"

#include <algorithm>
#include <chrono>

#include "instance/response_writer.h"
#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"
#include "util/clock.h"
#include "util/json.h"

namespace tritonpy {

namespace {

// CANCEL entries per frame: 16 bytes each, well under MAX_FRAME.
constexpr size_t kMaxCancelEntries = 4096;

}  // namespace

BatchTable::BatchTable(
    ModelState* model, TRITONBACKEND_ModelInstance* instance,
    StubSupervisor* stub, AdmissionGate* gate, BatchArenas* arenas)
    : model_(model),
      instance_(instance),
      stub_(stub),
      gate_(gate),
      arenas_(arenas)
{
}

void
BatchTable::Adopt()
{
  // adopted_ is empty between calls; swapped with the gate's pending
  // list, the two vectors' buffers are reused instead of one allocated on
  // the Execute thread and freed here per batch.
  gate_->TakePending(&adopted_);
  adopted_batches_ += adopted_.size();
  for (auto& batch : adopted_) {
    open_requests_ += batch->open;
    batches_[batch->id] = std::move(batch);
  }
  adopted_.clear();
}

void
BatchTable::Complete(Batch* batch, BatchRequest* req, uint32_t release_flags)
{
  FinishRequest(instance_, model_->name(), *batch, req, release_flags);
  --batch->open;
  --open_requests_;
}

void
BatchTable::FailOpenRequests(Batch* batch, const Status& status)
{
  for (size_t index : batch->wire_index) {
    BatchRequest* req = &batch->requests[index];
    if (req->complete()) continue;
    RespondWithError(req, status);
    Complete(batch, req, TRITONSERVER_REQUEST_RELEASE_ALL);
  }
}

void
BatchTable::MaybeEnd(const std::shared_ptr<Batch>& batch)
{
  if (!batch->returned() || batch->open > 0) return;
  ReportBatchStatistics(instance_, *batch, NowNs());
  arenas_->Free(batch.get());
  batches_.erase(batch->id);
  gate_->Ended(batch.get());
}

Status
BatchTable::OnExecuteDone(uint64_t batch_id, const Status& status)
{
  auto it = batches_.find(batch_id);
  if (it == batches_.end() || it->second->returned()) {
    return Violation(
        "EXECUTE_DONE or BATCH_DONE for batch " + std::to_string(batch_id) +
        ", which is not in flight");
  }
  std::shared_ptr<Batch> batch = it->second;
  batch->compute_end_ns = NowNs();
  // The batch a sync instance sent ahead starts now, not when it was sent
  // (statistics and the execute timeout count from here).
  auto next = std::next(it);
  if (next != batches_.end() && !next->second->returned() &&
      next->second->compute_start_ns < batch->compute_end_ns &&
      batch->sync_execute) {
    next->second->compute_start_ns = batch->compute_end_ns;
  }
  // With ok, requests still open are answered later through their
  // response senders (either mode); the stub ends each of them.
  if (!status.ok()) FailOpenRequests(batch.get(), status);
  gate_->Returned(batch.get());
  MaybeEnd(batch);
  return Status();
}

Status
BatchTable::OnResponses(
    const proto::FrameView& f, const uint8_t* body, const PeerArenas& peers,
    std::vector<proto::ArenaRef>* release)
{
  // The decoded entries and what is resolved from them live in scratch_,
  // reused from frame to frame: a frame of a few hundred streamed tokens
  // otherwise allocated tens of kilobytes, and glibc merged its free lists
  // on every such request (a third of this thread's time at 256 streams).
  ResponsesScratch& s = scratch_;
  struct Tidy {
    ResponsesScratch& s;
    ~Tidy() { s.Tidy(); }
  } tidy{s};
  proto::ResponsesBody& rb = s.body;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeResponses(body, f.body_len, &rb));
  // Validate everything first, so that a bad frame sends nothing.
  std::vector<std::shared_ptr<Batch>>& owners = s.owners;
  owners.assign(rb.responses.size(), nullptr);
  std::vector<uint64_t>& ending = s.ending;
  auto ended_here = [&](uint64_t id) {
    return std::find(ending.begin(), ending.end(), id) != ending.end();
  };
  for (size_t i = 0; i < rb.responses.size(); ++i) {
    const proto::Response& r = rb.responses[i];
    auto it = batches_.find(r.batch_id);
    const bool batch_end = (r.response_flags & proto::kRespBatchEnd) != 0;
    // A decoupled batch takes responses after EXECUTE_DONE too, but none
    // after the entry that ended it.
    if (it == batches_.end() || ended_here(r.batch_id) ||
        (batch_end && it->second->returned())) {
      return Violation(
          "response for batch " + std::to_string(r.batch_id) +
          ", which is not in flight");
    }
    if (batch_end) ending.push_back(r.batch_id);
    if (r.request_index >= it->second->wire_index.size()) {
      return Violation(
          "response for request index " + std::to_string(r.request_index) +
          " of a batch of " + std::to_string(it->second->wire_index.size()));
    }
    owners[i] = it->second;
  }
  const bool batch_done = (f.flags & proto::kFlagBatchDone) != 0;
  if (batch_done) {
    auto it = batches_.find(f.id);
    if (it == batches_.end() || it->second->returned() || ended_here(f.id)) {
      return Violation(
          "BATCH_DONE for batch " + std::to_string(f.id) +
          ", which is not in flight");
    }
  }
  std::vector<std::vector<const uint8_t*>>& data = s.data;
  TRITONPY_RETURN_IF_ERROR(ResolveOutputs(rb, peers, owners, &data, release));

  std::vector<proto::SendErrorBody> send_errors;
  for (size_t i = 0; i < rb.responses.size(); ++i) {
    const proto::Response& r = rb.responses[i];
    Batch* batch = owners[i].get();
    BatchRequest* req = &batch->requests[batch->wire_index[r.request_index]];
    const bool batch_end = (r.response_flags & proto::kRespBatchEnd) != 0;
    if (req->complete()) {
      TRITONPY_LOG_ERROR(
          "tritonpy: model '" + model_->name() + "' sent a response for " +
          "request '" + req->id + "', which is already complete; it is " +
          "dropped");
      if (batch_end)
        TRITONPY_RETURN_IF_ERROR(OnExecuteDone(r.batch_id, Status()));
      continue;
    }
    Status send_error;
    EntryOutcome outcome = WriteEntry(
        model_->name(), batch->decoupled, req, r, data[i], &send_error);
    if (!send_error.ok()) {
      TRITONPY_LOG_ERROR(
          "tritonpy: model '" + model_->name() + "' request '" + req->id +
          "': sending a response failed: " + send_error.message());
      send_errors.push_back(
          {r.batch_id, r.request_index,
           static_cast<uint32_t>(send_error.code()), send_error.message()});
    }
    if (outcome == EntryOutcome::kComplete) {
      Complete(batch, req, TRITONSERVER_REQUEST_RELEASE_ALL);
    } else if (outcome == EntryOutcome::kReschedule) {
      Complete(batch, req, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE);
    }
    if (batch_end) {
      TRITONPY_RETURN_IF_ERROR(OnExecuteDone(r.batch_id, Status()));
    } else {
      MaybeEnd(owners[i]);
    }
  }
  if (!send_errors.empty()) {
    std::shared_ptr<Channel> channel = stub_->CurrentChannel();
    for (const proto::SendErrorBody& e : send_errors) {
      const proto::Frame frame = proto::SendErrorFrame(e);
      if (channel != nullptr && frame.size() <= proto::kMaxFrame) {
        (void)channel->Send(frame);
      }
    }
  }
  if (batch_done) TRITONPY_RETURN_IF_ERROR(OnExecuteDone(f.id, Status()));
  return Status();
}

void
BatchTable::FailAll(const Status& status)
{
  // Copy: ending a batch erases it from batches_.
  std::vector<std::shared_ptr<Batch>> all;
  for (auto& [id, batch] : batches_) all.push_back(batch);
  for (auto& batch : all) {
    FailOpenRequests(batch.get(), status);
    if (!batch->returned()) {
      batch->compute_end_ns = NowNs();
      gate_->Returned(batch.get());
    }
    MaybeEnd(batch);
  }
  open_requests_ = 0;
}

void
BatchTable::PollCancellation(bool force)
{
  if (open_requests_ == 0) return;
  auto now = Clock::now();
  if (!force && now - last_cancel_poll_ < std::chrono::milliseconds(kPollMs)) {
    return;
  }
  last_cancel_poll_ = now;
  proto::CancelBody cancel;
  for (auto& [id, batch] : batches_) {
    for (size_t index : batch->wire_index) {
      BatchRequest* req = &batch->requests[index];
      if (req->complete() || req->cancel_sent) continue;
      bool cancelled = false;
      TRITONSERVER_Error* err =
          req->factory != nullptr
              ? TRITONBACKEND_ResponseFactoryIsCancelled(
                    req->factory, &cancelled)
              : TRITONBACKEND_RequestIsCancelled(req->request, &cancelled);
      if (err != nullptr) {
        TRITONSERVER_ErrorDelete(err);
        continue;
      }
      if (!cancelled) continue;
      req->cancel_sent = true;
      cancel.requests.push_back({batch->id, req->wire_pos});
    }
  }
  if (cancel.requests.empty()) return;
  std::shared_ptr<Channel> channel = stub_->CurrentChannel();
  if (channel == nullptr) return;
  for (size_t at = 0; at < cancel.requests.size(); at += kMaxCancelEntries) {
    proto::CancelBody part;
    size_t end = std::min(cancel.requests.size(), at + kMaxCancelEntries);
    part.requests.assign(
        cancel.requests.begin() + at, cancel.requests.begin() + end);
    // A failed send means the stub is gone; EOF handles that.
    (void)channel->Send(proto::CancelFrame(part));
  }
}

TRITONSERVER_InferenceTrace*
BatchTable::OpenRequestTrace(uint64_t batch_id, uint32_t index)
{
  auto it = batches_.find(batch_id);
  if (it == batches_.end() || index >= it->second->wire_index.size()) {
    return nullptr;
  }
  const BatchRequest& req = it->second->requests[it->second->wire_index[index]];
  if (req.complete() || req.request == nullptr) return nullptr;
  TRITONSERVER_InferenceTrace* trace = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestTrace(req.request, &trace);
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
    return nullptr;
  }
  return trace;
}

std::string
BatchTable::OverExecuteTimeout() const
{
  const double limit = model_->execute_timeout_seconds();
  if (limit <= 0) return "";
  const uint64_t limit_ns = static_cast<uint64_t>(limit * 1e9);
  const uint64_t now_ns = NowNs();
  for (const auto& [id, batch] : batches_) {
    if (batch->returned()) continue;
    if (now_ns - batch->compute_start_ns < limit_ns) {
      // A sync instance executes its batches in order: only the oldest one
      // still executing has started (the others were sent ahead).
      if (batch->sync_execute) break;
      continue;
    }
    std::string ids;
    for (size_t index : batch->wire_index) {
      if (!ids.empty()) ids += ", ";
      ids += "'" + batch->requests[index].id + "'";
    }
    return "execute of the batch with request(s) " + ids +
           " ran longer than the execute timeout (" +
           json::FormatNumber(limit) + " s)";
  }
  return "";
}

}  // namespace tritonpy
