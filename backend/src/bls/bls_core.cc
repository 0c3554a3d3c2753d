// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "bls/bls_core.h"

#include <chrono>

#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"

namespace tritonpy {

void
BlsCall::Cancel()
{
  MutexLock lock(&mu);
  if (request == nullptr) return;
  TRITONSERVER_Error* err = TRITONSERVER_InferenceRequestCancel(request);
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);
}

BlsCore::BlsCore(
    TRITONSERVER_Server* server, std::string describe, uint64_t size,
    const StubLimits& limits, std::shared_ptr<ArenaRoom> room,
    std::shared_ptr<StubUsage> usage)
    : server(server),
      describe(std::move(describe)),
      limits(limits),
      allocator(size, std::move(room)),
      usage_(std::move(usage))
{
}

BlsCore::~BlsCore()
{
  if (usage_ != nullptr) {
    // What is still counted goes with the core (adding the difference
    // subtracts, as unsigned numbers wrap).
    MutexLock lock(&mu);
    usage_->bls_calls.fetch_add(0 - counted_calls_);
    usage_->bls_bytes.fetch_add(0 - counted_bytes_);
  }
  if (triton_allocator != nullptr) {
    TRITONSERVER_Error* err =
        TRITONSERVER_ResponseAllocatorDelete(triton_allocator);
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
  }
}

void
BlsCore::FailEarly(
    const std::shared_ptr<Channel>& channel, uint64_t id, const Status& status)
{
  proto::BlsResponseBody body;
  body.response_flags = proto::kRespFinal;
  body.has_error = 1;
  body.error_code = static_cast<uint32_t>(status.code());
  body.error_message = status.message().substr(0, 60000);
  if (channel != nullptr) {
    (void)channel->Send(proto::BlsResponseFrame(id, body));
  }
}

bool
BlsCore::Report(BlsCall* call, CallEnd end)
{
  std::shared_ptr<BlsCall> last;  // freed outside mu
  MutexLock lock(&mu);
  auto it = calls.find(call->id);
  // Only calls Triton runs reach here, and they stay in the table until
  // both ends are in.
  if (it == calls.end() || it->second.call.get() != call) return false;
  CallEntry& e = it->second;
  bool& flag = end == CallEnd::kFinalSent ? e.final_sent : e.released;
  if (flag) return false;
  flag = true;
  if (e.final_sent && e.released) {
    last = e.call;
    Erase(it);
    cv.NotifyAll();
  }
  return true;
}

std::string
BlsCore::RefuseCall(const std::string& model, uint64_t bytes)
{
  const std::string head = "tritonpy: " + describe +
                           ": BLS request to model '" + model + "' refused: ";
  MutexLock lock(&mu);
  // A call whose final response is in still counts until Triton releases
  // its request, which the callee's thread does right after it answers: a
  // model that makes its next call at once may get there first. A call
  // that would pass a cap waits for those releases (kReleaseWait at most)
  // before it is refused.
  const auto deadline = std::chrono::steady_clock::now() + kReleaseWait;
  while ((CallsForCaps() >= limits.max_bls_calls ||
          bytes > limits.max_bls_bytes ||
          BytesForCaps() > limits.max_bls_bytes - bytes) &&
         AnsweredNotReleased() > 0) {
    ++release_waits;
    if (!cv.WaitUntil(deadline)) break;
  }
  const uint64_t in_flight = CallsForCaps();
  if (in_flight >= limits.max_bls_calls) {
    return head + std::to_string(in_flight) +
           " BLS calls of this instance are in flight, the most "
           "stub-max-bls-calls=" +
           std::to_string(limits.max_bls_calls) + " allows";
  }
  const uint64_t held = BytesForCaps();
  if (bytes > limits.max_bls_bytes || held > limits.max_bls_bytes - bytes) {
    return head + "its " + std::to_string(bytes) +
           " input bytes would take the BLS data held for this instance (" +
           std::to_string(held) + " bytes) past stub-max-bls-bytes=" +
           std::to_string(limits.max_bls_bytes);
  }
  return "";
}

bool
BlsCore::InTable(uint64_t id)
{
  MutexLock lock(&mu);
  return calls.count(id) != 0;
}

void
BlsCore::Insert(const std::shared_ptr<BlsCall>& call)
{
  MutexLock lock(&mu);
  calls[call->id].call = call;
  input_bytes += call->inputs.size();
  Recount();
}

void
BlsCore::Remove(const BlsCall* call)
{
  MutexLock lock(&mu);
  auto it = calls.find(call->id);
  if (it != calls.end() && it->second.call.get() == call) Erase(it);
}

void
BlsCore::Erase(std::map<uint64_t, CallEntry>::iterator it)
{
  input_bytes -= it->second.call->inputs.size();
  calls.erase(it);
  Recount();
  cv.NotifyAll();
}

size_t
BlsCore::AnsweredNotReleased()
{
  size_t n = 0;
  for (const auto& [id, e] : calls) n += e.final_sent && !e.released;
  return n;
}

void
BlsCore::Recount()
{
  if (usage_ == nullptr) return;
  const uint64_t now_calls = calls.size();
  const uint64_t now_bytes = HeldBytes();
  usage_->bls_calls.fetch_add(now_calls - counted_calls_);
  usage_->bls_bytes.fetch_add(now_bytes - counted_bytes_);
  counted_calls_ = now_calls;
  counted_bytes_ = now_bytes;
}

TRITONSERVER_Error*
BlsCore::AllocateInArena(
    BlsCall* call, const char* name, size_t byte_size, OutBuf* ob)
{
  MutexLock lock(&mu);
  // Only a call of the current stub may use the arenas (a dead stub's
  // responses are dropped anyway).
  if (call->channel != current) return nullptr;
  if (announced_to != call->channel) {
    allocator.MarkAllUnannounced();
    announced_to = call->channel;
  }
  const uint64_t most = limits.max_bls_bytes;
  const uint64_t held = BytesForCaps();
  if (byte_size > most || held > most - byte_size) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_UNAVAILABLE,
        ("tritonpy: " + describe + ": BLS output '" + name + "' of " +
         std::to_string(byte_size) + " bytes would take the " +
         "BLS data held for this instance (" + std::to_string(held) +
         " bytes) past stub-max-bls-bytes=" + std::to_string(most))
            .c_str());
  }
  Status s = allocator.Allocate(byte_size, &ob->alloc);
  if (!s.ok()) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        ("tritonpy: " + describe + ": no shared memory for BLS " + "output '" +
         name + "': " + s.message())
            .c_str());
  }
  ob->in_arena = true;
  ob->core = call->core;
  Recount();
  // A new arena goes to the stub before any frame refers to it; sent
  // under mu so that no other response can overtake it.
  for (const MappedArena* arena : allocator.Unannounced()) {
    (void)call->channel->Send(
        proto::BlsArenaFrame({arena->id(), arena->size()}), arena->fd());
    allocator.MarkAnnounced(arena->id());
  }
  return nullptr;
}

void
BlsCore::HandOver(const std::vector<OutBuf*>& bufs)
{
  MutexLock lock(&mu);
  for (OutBuf* ob : bufs) {
    ob->handed_over = true;
    handed.insert({ob->alloc.arena_id, ob->alloc.offset});
  }
}

void
BlsCore::TakeBack(const std::vector<OutBuf*>& bufs)
{
  MutexLock lock(&mu);
  for (OutBuf* ob : bufs) {
    // Back to Release, unless OnStubGone freed it.
    ob->handed_over = handed.erase({ob->alloc.arena_id, ob->alloc.offset}) == 0;
  }
}

void
BlsCore::FreeOutput(const OutBuf& ob)
{
  MutexLock lock(&mu);
  allocator.Free(ob.alloc.arena_id, ob.alloc.offset);
  Recount();
}

}  // namespace tritonpy
