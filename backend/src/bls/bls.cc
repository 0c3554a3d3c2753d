// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "bls/bls.h"

#include <chrono>
#include <new>
#include <thread>
#include <utility>

#include "bls/bls_core.h"
#include "bls/bls_request.h"
#include "triton/triton_util.h"
#include "util/json.h"

namespace tritonpy {

namespace {

// How long ~Bls waits for cancelled calls to be given back by Triton.
constexpr auto kDrainWait = std::chrono::seconds(5);

// Why a request Triton refused before it ran failed, in the official
// backend's words: that backend asks whether the named model and version
// are ready before it builds the request, and a model that is not (unknown,
// a version not loaded, unloading) fails with "... is not ready."; Triton's
// own message follows it in parentheses. Any other refusal keeps Triton's
// message alone. Asked only once Triton refused, so a call to a ready model
// pays nothing for it.
Status
Refusal(TRITONSERVER_Server* server, const proto::BlsRequestBody& rb, Status s)
{
  bool ready = false;
  if (FromTriton(TRITONSERVER_ServerModelIsReady(
                     server, rb.model_name.c_str(), rb.model_version, &ready))
          .ok() &&
      !ready) {
    s = Status::Error(
        s.code(), "Failed for execute the inference request. Model '" +
                      rb.model_name + "' is not ready. (" + s.message() + ")");
  }
  return s.WithPrefix(
      "Model " + rb.model_name + " - Error when running inference: ");
}

}  // namespace

Bls::Bls(
    TRITONSERVER_Server* server, std::string describe, uint64_t arena_byte_size,
    bool model_control, const StubLimits& limits,
    std::shared_ptr<ArenaRoom> room, SandboxedControl sandboxed,
    std::shared_ptr<StubUsage> usage, Bls* control)
    : model_control_(model_control),
      sandbox_refuses_(sandboxed.sandboxed && !sandboxed.allowed),
      core_(
          std::make_shared<BlsCore>(
              server, describe, arena_byte_size, limits, std::move(room),
              std::move(usage))),
      own_control_(server, std::move(describe), std::move(sandboxed)),
      control_(control != nullptr ? control->control_ : &own_control_)
{
  TRITONSERVER_Error* err = TRITONSERVER_ResponseAllocatorNew(
      &core_->triton_allocator, BlsOutputAlloc, BlsOutputRelease, nullptr);
  if (err != nullptr) {
    TRITONPY_LOG_ERROR(
        "tritonpy: " + core_->describe +
        ": cannot create the BLS response allocator: " +
        TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
    core_->triton_allocator = nullptr;
  }
}

Bls::~Bls()
{
  OnStubGone();
  {
    const auto deadline = std::chrono::steady_clock::now() + kDrainWait;
    MutexLock lock(&core_->mu);
    while (!core_->calls.empty() && core_->cv.WaitUntil(deadline)) {}
    if (!core_->calls.empty()) {
      TRITONPY_LOG_WARN(
          "tritonpy: " + core_->describe + ": " +
          std::to_string(core_->calls.size()) +
          " BLS call(s) still in flight at unload");
    }
  }
  own_control_.Stop();
}

void
Bls::DebugCounters(uint64_t* calls, uint64_t* arena_bytes) const
{
  MutexLock lock(&core_->mu);
  *calls = core_->calls.size();
  *arena_bytes = core_->allocator.allocated_bytes();
}

uint64_t
Bls::ReleaseWaits() const
{
  MutexLock lock(&core_->mu);
  return core_->release_waits;
}

void
Bls::OnStubGone()
{
  // Model-control requests of the dead stub not started yet are dropped.
  // (Only its own: a borrowed worker serves its stub on.)
  if (control_ == &own_control_) own_control_.DropPending();
  std::vector<std::shared_ptr<BlsCall>> calls;
  {
    MutexLock lock(&core_->mu);
    core_->current = nullptr;
    core_->announced_to = nullptr;
    for (const auto& h : core_->handed) {
      core_->allocator.Free(h.first, h.second);
    }
    core_->handed.clear();
    core_->Recount();
    for (auto& kv : core_->calls) calls.push_back(kv.second.call);
  }
  for (auto& call : calls) call->Cancel();
}

Status
Bls::OnFrame(
    const proto::FrameView& f, const uint8_t* body, const PeerArenas& peers,
    const std::shared_ptr<Channel>& channel,
    std::vector<proto::ArenaRef>* release, const TraceOf& trace_of)
{
  {
    MutexLock lock(&core_->mu);
    core_->current = channel;
  }
  switch (f.type) {
    case proto::FrameType::kBlsRelease:
      return OnRelease(f, body);
    case proto::FrameType::kBlsCancel:
      return OnCancel(f, body);
    case proto::FrameType::kModelControl:
      return OnModelControl(f, body, channel);
    case proto::FrameType::kBlsRequest:
      return OnRequest(f, body, peers, channel, release, trace_of);
    default:
      return Violation("not a BLS frame");
  }
}

Status
Bls::OnRelease(const proto::FrameView& f, const uint8_t* body)
{
  proto::ReleaseBody rb;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeRelease(body, f.body_len, &rb));
  MutexLock lock(&core_->mu);
  for (const proto::ArenaRef& r : rb.allocations) {
    if (core_->handed.erase({r.arena_id, r.offset}) == 0) {
      return Violation(
          "BLS_RELEASE of an allocation the stub does not hold (arena " +
          std::to_string(r.arena_id) + " offset " + std::to_string(r.offset) +
          ")");
    }
    core_->allocator.Free(r.arena_id, r.offset);
  }
  core_->Recount();
  return Status();
}

Status
Bls::OnCancel(const proto::FrameView& f, const uint8_t* body)
{
  TRITONPY_RETURN_IF_ERROR(proto::DecodeEmpty(body, f.body_len));
  std::shared_ptr<BlsCall> call;
  {
    MutexLock lock(&core_->mu);
    auto it = core_->calls.find(f.id);
    // Nothing to cancel once the final response went out.
    if (it != core_->calls.end() && !it->second.final_sent) {
      call = it->second.call;
    }
  }
  if (call != nullptr) call->Cancel();
  return Status();
}

Status
Bls::OnModelControl(
    const proto::FrameView& f, const uint8_t* body,
    const std::shared_ptr<Channel>& channel)
{
  std::string text;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeJson(body, f.body_len, &text));
  auto msg = std::make_shared<json::Value>();
  Status ps = json::Parse(text, msg.get());
  if (!ps.ok() || !msg->is_object()) {
    return Violation("MODEL_CONTROL body is not a JSON object");
  }
  // Refusals are answered at once: the keys are the operator's, not the
  // model's. A sandboxed model's code must not put code of its own under
  // another model's name, take a model away, or load one outside the
  // sandbox.
  const bool changes = json::GetString(*msg, "op") != "is_ready";
  const char* refused = nullptr;
  if (changes && !model_control_) {
    refused =
        "tritonpy: the model loading API is turned off "
        "(backend config stub-model-control=false)";
  } else if (changes && sandbox_refuses_) {
    refused =
        "tritonpy: a sandboxed model may not load or unload models "
        "(backend config stub-sandbox-model-control=false)";
  }
  if (refused != nullptr) {
    (void)SendModelControlDone(channel.get(), f.id, ModelControlError(refused));
    return Status();
  }
  return control_->Submit(channel, f.id, std::move(msg));
}

Status
Bls::OnRequest(
    const proto::FrameView& f, const uint8_t* body, const PeerArenas& peers,
    const std::shared_ptr<Channel>& channel,
    std::vector<proto::ArenaRef>* release, const TraceOf& trace_of)
{
  proto::BlsRequestBody rb;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeBlsRequest(body, f.body_len, &rb));
  BlsInputPlan plan;
  TRITONPY_RETURN_IF_ERROR(
      PlanBlsInputs(f.id, rb.request, peers, release, &plan));
  const std::string why = core_->RefuseCall(rb.model_name, plan.total);
  if (!why.empty()) {
    BlsCore::FailEarly(channel, f.id, Status::Unavailable(why));
    return Status();
  }
  auto call = std::make_shared<BlsCall>();
  call->core = core_;
  call->channel = channel;
  call->id = f.id;
  call->model_name = rb.model_name;
  try {
    call->inputs.resize(plan.total);
  } catch (const std::bad_alloc&) {
    BlsCore::FailEarly(
        channel, f.id,
        Status::Unavailable(
            "tritonpy: " + core_->describe + ": no memory to copy the " +
            std::to_string(plan.total) + " input bytes of a BLS request to " +
            "model '" + rb.model_name + "'"));
    return Status();
  }
  std::vector<const uint8_t*> data;
  CopyBlsInputs(rb.request, plan, call->inputs.data(), &data);
  if (core_->InTable(f.id)) {
    return Violation(
        "BLS call id " + std::to_string(f.id) + " is already in flight");
  }
  if (core_->triton_allocator == nullptr) {
    BlsCore::FailEarly(
        channel, f.id,
        Status::Unavailable(
            "tritonpy: BLS is unavailable in " + core_->describe));
    return Status();
  }
  Run(call, rb, data, trace_of);
  return Status();
}

void
Bls::Run(
    const std::shared_ptr<BlsCall>& call, const proto::BlsRequestBody& rb,
    const std::vector<const uint8_t*>& data, const TraceOf& trace_of)
{
  TRITONSERVER_InferenceRequest* req = nullptr;
  Status s = FromTriton(TRITONSERVER_InferenceRequestNew(
      &req, core_->server, rb.model_name.c_str(), rb.model_version));
  if (s.ok()) s = BuildBlsRequest(req, rb.request, data);
  if (s.ok()) {
    s = FromTriton(TRITONSERVER_InferenceRequestSetReleaseCallback(
        req, BlsOnRequestRelease, call.get()));
  }
  if (s.ok()) {
    s = FromTriton(TRITONSERVER_InferenceRequestSetResponseCallback(
        req, core_->triton_allocator, call.get(), BlsOnResponse, call.get()));
  }
  if (s.ok()) {
    core_->Insert(call);
    {
      MutexLock lock(&call->mu);
      call->request = req;
    }
    // The call continues the trace of the request it names (as the
    // official backend does: a child of that trace).
    TRITONSERVER_InferenceTrace* trace = nullptr;
    TRITONSERVER_InferenceTrace* parent =
        rb.trace_batch_id != 0
            ? trace_of(rb.trace_batch_id, rb.trace_request_index)
            : nullptr;
    if (parent != nullptr) {
      TRITONSERVER_Error* err =
          TRITONSERVER_InferenceTraceSpawnChildTrace(parent, &trace);
      if (err != nullptr) {
        TRITONPY_LOG_WARN(
            "tritonpy: " + core_->describe + ": BLS request to model '" +
            rb.model_name + "' is not traced: " + FromTriton(err).message());
        trace = nullptr;
      }
    }
    s = FromTriton(TRITONSERVER_ServerInferAsync(core_->server, req, trace));
    if (!s.ok()) {
      core_->Remove(call.get());
      MutexLock lock(&call->mu);
      call->request = nullptr;
    }
  }
  if (s.ok()) return;
  if (req != nullptr) {
    TRITONSERVER_Error* err = TRITONSERVER_InferenceRequestDelete(req);
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
  }
  // The official backend's wording, so that models matching it still do.
  BlsCore::FailEarly(call->channel, call->id, Refusal(core_->server, rb, s));
}

}  // namespace tritonpy
