// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The reader thread's side of batches: RESPONSES and EXECUTE_DONE,
// request completion, batch end, cancellation polling, failing everything
// when the stub goes away, and the readiness query.

#include <algorithm>
#include <chrono>

#include "clock.h"
#include "instance_state.h"
#include "json.h"
#include "response_writer.h"
#include "triton_util.h"

namespace tritonpy {

namespace {

// CANCEL entries per frame: 16 bytes each, well under MAX_FRAME.
constexpr size_t kMaxCancelEntries = 4096;
// How long past finalize-grace-seconds a draining stub may keep requests.
constexpr int64_t kDrainSlackMs = 2000;

}  // namespace

void
InstanceState::AdoptPendingBatches()
{
  std::vector<std::shared_ptr<Batch>> adopted;
  gate_.TakePending(&adopted);
  adopted_batches_ += adopted.size();
  for (auto& batch : adopted) {
    open_requests_ += batch->open;
    batches_[batch->id] = std::move(batch);
  }
}

void
InstanceState::CompleteRequest(
    Batch* batch, BatchRequest* req, uint32_t release_flags)
{
  FinishRequest(instance_, model_->name(), *batch, req, release_flags);
  --batch->open;
  --open_requests_;
}

void
InstanceState::FailOpenRequests(Batch* batch, const Status& status)
{
  for (size_t index : batch->wire_index) {
    BatchRequest* req = &batch->requests[index];
    if (req->complete) continue;
    RespondWithError(req, status);
    CompleteRequest(batch, req, TRITONSERVER_REQUEST_RELEASE_ALL);
  }
}

void
InstanceState::MaybeEndBatch(const std::shared_ptr<Batch>& batch)
{
  if (!batch->returned() || batch->open > 0) return;
  ReportBatchStatistics(*batch, NowNs());
  FreeAllocations(batch.get());
  batches_.erase(batch->id);
  gate_.Ended(batch.get());
}

Status
InstanceState::OnExecuteDone(uint64_t batch_id, const Status& status)
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
  gate_.Returned(batch.get());
  MaybeEndBatch(batch);
  return Status();
}

Status
InstanceState::OnResponses(
    const proto::FrameView& f, const uint8_t* body,
    std::vector<proto::ArenaRef>* release)
{
  proto::ResponsesBody rb;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeResponses(body, f.body_len, &rb));
  // Validate everything first, so that a bad frame sends nothing.
  std::vector<std::shared_ptr<Batch>> owners(rb.responses.size());
  std::vector<uint64_t> ending;  // batches ended by an entry (BATCH_END)
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
  std::vector<std::vector<const uint8_t*>> data;
  TRITONPY_RETURN_IF_ERROR(ResolveOutputs(rb, peers_, owners, &data, release));

  std::vector<proto::SendErrorBody> send_errors;
  for (size_t i = 0; i < rb.responses.size(); ++i) {
    const proto::Response& r = rb.responses[i];
    Batch* batch = owners[i].get();
    BatchRequest* req = &batch->requests[batch->wire_index[r.request_index]];
    const bool batch_end = (r.response_flags & proto::kRespBatchEnd) != 0;
    if (req->complete) {
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
      CompleteRequest(batch, req, TRITONSERVER_REQUEST_RELEASE_ALL);
    } else if (outcome == EntryOutcome::kReschedule) {
      CompleteRequest(batch, req, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE);
    }
    if (batch_end) {
      TRITONPY_RETURN_IF_ERROR(OnExecuteDone(r.batch_id, Status()));
    } else {
      MaybeEndBatch(owners[i]);
    }
  }
  if (!send_errors.empty()) {
    std::shared_ptr<Channel> channel = stub_.CurrentChannel();
    for (const proto::SendErrorBody& e : send_errors) {
      auto frame = proto::MakeFrame(
          proto::FrameType::kSendError, 0, 0,
          [&](std::vector<uint8_t>* out) { proto::EncodeSendError(e, out); });
      if (channel != nullptr && frame.size() <= proto::kMaxFrame) {
        (void)channel->Send(frame);
      }
    }
  }
  if (batch_done) TRITONPY_RETURN_IF_ERROR(OnExecuteDone(f.id, Status()));
  return Status();
}

void
InstanceState::FailAllBatches(const Status& status)
{
  // Copy: ending a batch erases it from batches_.
  std::vector<std::shared_ptr<Batch>> all;
  for (auto& [id, batch] : batches_) all.push_back(batch);
  for (auto& batch : all) {
    FailOpenRequests(batch.get(), status);
    if (!batch->returned()) {
      batch->compute_end_ns = NowNs();
      gate_.Returned(batch.get());
    }
    MaybeEndBatch(batch);
  }
  open_requests_ = 0;
}

void
InstanceState::PollCancellation(bool force)
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
      if (req->complete || req->cancel_sent) continue;
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
  std::shared_ptr<Channel> channel = stub_.CurrentChannel();
  if (channel == nullptr) return;
  for (size_t at = 0; at < cancel.requests.size(); at += kMaxCancelEntries) {
    proto::CancelBody part;
    size_t end = std::min(cancel.requests.size(), at + kMaxCancelEntries);
    part.requests.assign(
        cancel.requests.begin() + at, cancel.requests.begin() + end);
    auto frame = proto::MakeFrame(
        proto::FrameType::kCancel, 0, 0,
        [&](std::vector<uint8_t>* out) { proto::EncodeCancel(part, out); });
    // A failed send means the stub is gone; EOF handles that.
    (void)channel->Send(frame);
  }
}

void
InstanceState::PollUnload()
{
  drain_->open_requests.store(open_requests_);
  if (open_requests_ == 0) {
    drain_sent_ = false;  // a later unload with new work drains again
    drain_->unloading.store(false);
    return;
  }
  if (drain_sent_ || !drain_->unloading.load()) return;
  std::shared_ptr<Channel> channel = stub_.CurrentChannel();
  if (channel == nullptr) return;
  TRITONPY_LOG_INFO(
      "tritonpy: " + Describe() + " is being unloaded with " +
      std::to_string(open_requests_) +
      " request(s) in flight; they get finalize-grace-seconds to finish");
  auto frame = proto::MakeFrame(
      proto::FrameType::kDrain, 0, 0, [](std::vector<uint8_t>*) {});
  (void)channel->Send(frame);  // a failed send means the stub is gone: EOF
  drain_sent_ = true;
  drain_sent_at_ = Clock::now();
}

std::string
InstanceState::OverDeadline(bool* unloading)
{
  *unloading = false;
  if (open_requests_ == 0) return "";
  const auto now = Clock::now();
  if (drain_sent_) {
    // The stub answers every open request itself once the grace is over;
    // one that cannot (stuck in a sync execute) is killed a little later.
    const double grace = model_->backend().settings().finalize_grace_seconds;
    if (now - drain_sent_at_ >
        std::chrono::milliseconds(
            static_cast<int64_t>(1000 * grace) + kDrainSlackMs)) {
      *unloading = true;
      return "it kept " + std::to_string(open_requests_) +
             " request(s) after the unload's finalize-grace-seconds (" +
             json::Value::Double(grace).Serialize() + " s)";
    }
  }
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
           json::Value::Double(limit).Serialize() + " s)";
  }
  return "";
}

void
InstanceState::OnReady(uint64_t query_id, const proto::ReadyBody& answer)
{
  MutexLock lock(&stub_.mu);
  // Answers to queries that timed out are dropped.
  if (ready_queries_.count(query_id) == 0) return;
  ready_answers_[query_id] = answer;
  stub_.cv.NotifyAll();
}

Status
InstanceState::CheckReady()
{
  const double timeout_s = model_->backend().settings().ready_timeout_seconds;
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(1000 * timeout_s));
  std::shared_ptr<Channel> channel;
  uint64_t query_id = 0;
  uint64_t generation = 0;
  {
    MutexLock lock(&stub_.mu);
    if (!stub_.serving()) {
      return Status::Unavailable(
          "tritonpy: " + Describe() + " is not ready: " +
          stub_.UnavailableReason("the stub is restarting"));
    }
    if (!stub_.traits().has_is_ready) return Status();
    channel = stub_.channel();
    generation = stub_.generation();
    query_id = next_query_id_++;
    ready_queries_.insert(query_id);
  }
  auto frame = proto::MakeFrame(
      proto::FrameType::kIsReady, 0, query_id, [](std::vector<uint8_t>*) {});
  Status sent = channel->Send(frame);
  MutexLock lock(&stub_.mu);
  auto gone = [&]() REQUIRES(stub_.mu) {
    return stub_.generation() != generation ||
           stub_.state() != StubState::kReady;
  };
  if (sent.ok()) {
    const auto deadline = Clock::now() + timeout;
    while (ready_answers_.count(query_id) == 0 && !gone() &&
           stub_.cv.WaitUntil(deadline)) {}
  }
  ready_queries_.erase(query_id);
  auto it = ready_answers_.find(query_id);
  if (it == ready_answers_.end()) {
    std::string why = !sent.ok() || gone()
                          ? "the stub went away during the readiness check"
                          : "is_ready() did not answer within " +
                                json::Value::Double(timeout_s).Serialize() +
                                " s (ready-timeout-seconds)";
    return Status::Unavailable(
        "tritonpy: " + Describe() + " is not ready: " + why);
  }
  proto::ReadyBody answer = it->second;
  ready_answers_.erase(it);
  if (answer.ready != 0) return Status();
  return Status::Unavailable(
      "tritonpy: " + Describe() + " is not ready" +
      (answer.message.empty() ? std::string() : ": " + answer.message));
}

TRITONSERVER_InferenceTrace*
InstanceState::OpenRequestTrace(uint64_t batch_id, uint32_t index)
{
  auto it = batches_.find(batch_id);
  if (it == batches_.end() || index >= it->second->wire_index.size()) {
    return nullptr;
  }
  const BatchRequest& req = it->second->requests[it->second->wire_index[index]];
  if (req.complete || req.request == nullptr) return nullptr;
  TRITONSERVER_InferenceTrace* trace = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestTrace(req.request, &trace);
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
    return nullptr;
  }
  return trace;
}

}  // namespace tritonpy
