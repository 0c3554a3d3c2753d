// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Triton's callbacks of a BLS call (bls_core.h): where its outputs are
// written (the response allocator), each response assembled into one
// BLS_RESPONSE, and the request's release. They run on Triton's threads.

#include <memory>
#include <string>
#include <vector>

#include "bls/bls_core.h"
#include "protocol/protocol_frames.h"
#include "triton/params.h"
#include "triton/triton_util.h"
#include "util/barrier.h"

namespace tritonpy {

namespace {

// Inline bytes one BLS_RESPONSE may carry; the rest goes to the arena.
constexpr size_t kInlineBudget = 96 << 10;

// The error response that replaces a BLS response too large for a frame:
// the called model, the frame's size and what filled it.
proto::BlsResponseBody
TooLargeResponse(
    const std::string& model, const proto::BlsResponseBody& body,
    size_t frame_bytes)
{
  uint64_t inline_bytes = 0;
  for (const proto::Tensor& t : body.outputs) {
    if (t.location == proto::kLocationInline) inline_bytes += t.byte_size;
  }
  proto::BlsResponseBody err;
  err.response_flags = body.response_flags;
  err.has_error = 1;
  err.error_code = static_cast<uint32_t>(TRITONSERVER_ERROR_UNSUPPORTED);
  err.error_message =
      "tritonpy: BLS response from model '" + model +
      "' too large for a frame: " + std::to_string(frame_bytes) +
      " bytes, the most is " + std::to_string(proto::kMaxFrame) + " (" +
      std::to_string(body.parameters.size()) + " bytes of parameters, " +
      "outputs: " + std::to_string(body.outputs.size()) + ", " +
      std::to_string(inline_bytes) + " of their bytes inline)";
  return err;
}

TRITONSERVER_Error*
OutputAllocBody(
    const char* name, size_t byte_size, void* userp, void** buffer,
    void** buffer_userp, TRITONSERVER_MemoryType* actual_type,
    int64_t* actual_type_id)
{
  auto* call = static_cast<BlsCall*>(userp);
  *actual_type = TRITONSERVER_MEMORY_CPU;
  *actual_type_id = 0;
  *buffer = nullptr;
  *buffer_userp = nullptr;
  if (byte_size == 0) return nullptr;
  auto ob = std::make_unique<OutBuf>();
  if (byte_size > kBlsInlineOutputMax) {
    TRITONSERVER_Error* err =
        call->core->AllocateInArena(call, name, byte_size, ob.get());
    if (err != nullptr) return err;
  }
  if (ob->in_arena) {
    *buffer = ob->alloc.ptr;
  } else {
    ob->heap.resize(byte_size);
    *buffer = ob->heap.data();
  }
  *buffer_userp = ob.release();
  return nullptr;
}

// Fills body.outputs from `response`; outputs in a BLS arena are appended
// to `arena_bufs`. Returns Triton's error (then body.outputs is partial).
TRITONSERVER_Error*
CollectOutputs(
    TRITONSERVER_InferenceResponse* response, proto::BlsResponseBody* body,
    std::vector<OutBuf*>* arena_bufs)
{
  uint32_t count = 0;
  TRITONSERVER_Error* err =
      TRITONSERVER_InferenceResponseOutputCount(response, &count);
  size_t budget = kInlineBudget;
  for (uint32_t i = 0; err == nullptr && i < count; ++i) {
    proto::Tensor t;
    const char* name = nullptr;
    TRITONSERVER_DataType dtype;
    const int64_t* shape = nullptr;
    uint64_t ndim = 0;
    const void* base = nullptr;
    size_t byte_size = 0;
    TRITONSERVER_MemoryType mtype;
    int64_t mtype_id;
    void* buf_userp = nullptr;
    err = TRITONSERVER_InferenceResponseOutput(
        response, i, &name, &dtype, &shape, &ndim, &base, &byte_size, &mtype,
        &mtype_id, &buf_userp);
    if (err != nullptr) break;
    t.name = name;
    t.dtype = static_cast<uint32_t>(dtype);
    t.dims.assign(shape, shape + ndim);
    t.byte_size = byte_size;
    auto* ob = static_cast<OutBuf*>(buf_userp);
    if (mtype == TRITONSERVER_MEMORY_GPU) {
      return TRITONSERVER_ErrorNew(
          TRITONSERVER_ERROR_UNSUPPORTED,
          ("tritonpy: BLS output '" + t.name + "' is in GPU memory").c_str());
    }
    if (ob != nullptr && ob->in_arena) {
      t.location = proto::kLocationArena;
      t.ref.arena_id = ob->alloc.arena_id;
      t.ref.offset = ob->alloc.offset;
      arena_bufs->push_back(ob);
    } else if (byte_size <= budget) {
      t.location = proto::kLocationInline;
      t.data = static_cast<const uint8_t*>(base);
      budget -= byte_size;
    } else {
      return TRITONSERVER_ErrorNew(
          TRITONSERVER_ERROR_INTERNAL,
          ("tritonpy: BLS output '" + t.name + "' does not fit in a " +
           "response frame")
              .c_str());
    }
    body->outputs.push_back(std::move(t));
  }
  return err;
}

// The BLS_RESPONSE body of `response` (null: a final flag alone).
proto::BlsResponseBody
ResponseBody(
    TRITONSERVER_InferenceResponse* response, bool final,
    std::vector<OutBuf*>* arena_bufs)
{
  proto::BlsResponseBody body;
  body.response_flags = final ? proto::kRespFinal : 0;
  if (response == nullptr) return body;
  TRITONSERVER_Error* rerr = TRITONSERVER_InferenceResponseError(response);
  if (rerr != nullptr) {
    body.has_error = 1;
    body.error_code = static_cast<uint32_t>(TRITONSERVER_ErrorCode(rerr));
    body.error_message = TRITONSERVER_ErrorMessage(rerr);
    return body;
  }
  TRITONSERVER_Error* err =
      ToTriton(BlsResponseParametersToJson(response, &body.parameters));
  if (err == nullptr) err = CollectOutputs(response, &body, arena_bufs);
  if (err != nullptr) {
    body.outputs.clear();
    arena_bufs->clear();
    body.parameters.clear();
    body.has_error = 1;
    body.error_code = static_cast<uint32_t>(TRITONSERVER_ErrorCode(err));
    body.error_message = TRITONSERVER_ErrorMessage(err);
    TRITONSERVER_ErrorDelete(err);
  }
  return body;
}

// Sets *deleted once it deleted `response`.
void
OnResponseBody(
    TRITONSERVER_InferenceResponse* response, const uint32_t flags,
    BlsCall* call, bool* deleted)
{
  std::shared_ptr<BlsCore> core = call->core;     // alive through this call
  InjectFault(call->model_name, "BLS_RESPONSE");  // the called model's name
  const bool final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  std::vector<OutBuf*> arena_bufs;
  proto::BlsResponseBody body = ResponseBody(response, final, &arena_bufs);
  proto::Frame frame = proto::BlsResponseFrame(call->id, body);
  if (frame.size() > proto::kMaxFrame) {
    // Huge response parameters or many inline outputs: the stub gets this
    // response as an error naming the called model instead, so that its
    // call still ends (an unsent final response would leave it waiting).
    // The arena space stays ours and is freed with the response.
    body = TooLargeResponse(call->model_name, body, frame.size());
    arena_bufs.clear();
    frame = proto::BlsResponseFrame(call->id, body);
  }
  // The stub owns the arena space from the moment it may see the frame.
  core->HandOver(arena_bufs);
  if (!call->channel->Send(frame).ok()) core->TakeBack(arena_bufs);
  if (response != nullptr) {
    // Release (called from here) frees the arena space not handed over.
    *deleted = true;
    TRITONSERVER_Error* e = TRITONSERVER_InferenceResponseDelete(response);
    if (e != nullptr) TRITONSERVER_ErrorDelete(e);
  }
  if (final) (void)core->Report(call, BlsCore::CallEnd::kFinalSent);
}

}  // namespace

TRITONSERVER_Error*
BlsOutputAlloc(
    TRITONSERVER_ResponseAllocator*, const char* name, size_t byte_size,
    TRITONSERVER_MemoryType, int64_t, void* userp, void** buffer,
    void** buffer_userp, TRITONSERVER_MemoryType* actual_type,
    int64_t* actual_type_id)
{
  TRITONSERVER_Error* err = nullptr;
  Status s = Guarded("BLS output allocation", [&] {
    err = OutputAllocBody(
        name, byte_size, userp, buffer, buffer_userp, actual_type,
        actual_type_id);
    return Status();
  });
  if (s.ok()) return err;
  *buffer = nullptr;
  *buffer_userp = nullptr;
  return ToTriton(s);
}

TRITONSERVER_Error*
BlsOutputRelease(
    TRITONSERVER_ResponseAllocator*, void*, void* buffer_userp, size_t,
    TRITONSERVER_MemoryType, int64_t)
{
  return ToTriton(Guarded("BLS output release", [&] {
    auto* ob = static_cast<OutBuf*>(buffer_userp);
    if (ob == nullptr) return Status();
    // Never reached the stub (an error response, a dead stub): ours to
    // free.
    if (ob->in_arena && !ob->handed_over) ob->core->FreeOutput(*ob);
    delete ob;
    return Status();
  }));
}

void
BlsOnResponse(
    TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp)
{
  auto* call = static_cast<BlsCall*>(userp);
  std::shared_ptr<BlsCore> core = call->core;  // alive through this call
  bool deleted = false;
  const Status s = Guarded("BLS response", [&] {
    OnResponseBody(response, flags, call, &deleted);
    return Status();
  });
  if (s.ok()) return;
  // The stub's call ends with the error. The response is deleted unless
  // the body got that far (a held response would keep its model loaded);
  // arena space it had handed over stays with the stub's allocation table.
  (void)Guarded("BLS response", [&] {
    TRITONPY_LOG_ERROR("tritonpy: " + core->describe + ": " + s.message());
    if (!deleted && response != nullptr) {
      TRITONSERVER_Error* e = TRITONSERVER_InferenceResponseDelete(response);
      if (e != nullptr) TRITONSERVER_ErrorDelete(e);
    }
    if ((flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) == 0) return Status();
    // Copied first: the report may free the call.
    const std::shared_ptr<Channel> channel = call->channel;
    const uint64_t id = call->id;
    if (core->Report(call, BlsCore::CallEnd::kFinalSent)) {
      BlsCore::FailEarly(channel, id, s);
    }
    return Status();
  });
}

void
BlsOnRequestRelease(
    TRITONSERVER_InferenceRequest* request, const uint32_t, void* userp)
{
  auto* call = static_cast<BlsCall*>(userp);
  std::shared_ptr<BlsCore> core = call->core;  // alive through this call
  {
    MutexLock lock(&call->mu);
    call->request = nullptr;
  }
  TRITONSERVER_Error* err = TRITONSERVER_InferenceRequestDelete(request);
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);
  const Status s = Guarded("BLS request release", [&] {
    (void)core->Report(call, BlsCore::CallEnd::kReleased);
    return Status();
  });
  if (!s.ok()) {
    TRITONPY_LOG_ERROR("tritonpy: " + core->describe + ": " + s.message());
  }
}

}  // namespace tritonpy
