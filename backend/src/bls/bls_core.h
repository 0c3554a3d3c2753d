// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The shared state of one instance's BLS calls (bls.h): the call table
// with its caps, and the BLS arenas that large outputs are written to.
// Internal to the BLS files: bls.cc starts and cancels calls on the reader
// thread; Triton's threads run the callbacks of bls_response.cc. Each call
// keeps the core alive, so a call that outlives its instance never touches
// freed memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ipc/arena.h"
#include "ipc/channel.h"
#include "protocol/protocol.h"
#include "triton_c_api/triton_infer_api.h"
#include "util/error.h"
#include "util/mutex.h"

namespace tritonpy {

class BlsCore;

// Outputs up to this size are sent inline (one copy, no BLS_RELEASE round
// trip); larger ones stay where Triton wrote them, in a BLS arena.
constexpr size_t kBlsInlineOutputMax = 16 << 10;

// Where Triton wrote one output: an arena allocation, or call-owned heap
// memory for small outputs (and for calls whose stub is gone). Touched by
// the callbacks of its one response, one at a time.
struct OutBuf {
  std::shared_ptr<BlsCore> core;  // set for arena allocations
  bool in_arena = false;
  Allocation alloc;
  std::vector<uint8_t> heap;
  // Set once the stub was sent a reference: then the stub frees it.
  bool handed_over = false;
};

// One BLS call. Its one owner is the core's call table (BlsCore::calls):
// Triton's callbacks hold only the raw pointer, and each reports its end
// (the final response sent, the request released) to the table under the
// core's lock. The report that completes the pair takes the call out of
// the table and frees it; neither callback touches the call after its own
// report. Whoever else needs the call (BLS_CANCEL, OnStubGone) copies the
// shared_ptr out of the table first.
struct BlsCall {
  std::shared_ptr<BlsCore> core;
  std::shared_ptr<Channel> channel;
  uint64_t id = 0;
  std::string model_name;
  std::vector<uint8_t> inputs;  // copies of the input bytes

  Mutex mu;
  // Null once Triton released it (or before it was started).
  TRITONSERVER_InferenceRequest* request GUARDED_BY(mu) = nullptr;

  // Cancels the Triton request, unless it was released already.
  void Cancel() EXCLUDES(mu);
};

class BlsCore {
 public:
  // `usage`: what the BLS calls of this stub's other cores count against
  // the same caps (null: this core's alone).
  BlsCore(
      TRITONSERVER_Server* server, std::string describe, uint64_t size,
      const StubLimits& limits, std::shared_ptr<ArenaRoom> room = nullptr,
      std::shared_ptr<StubUsage> usage = nullptr);
  ~BlsCore();  // deletes triton_allocator
  BlsCore(const BlsCore&) = delete;
  BlsCore& operator=(const BlsCore&) = delete;

  // Sends the final error response of a call that never reached Triton.
  static void FailEarly(
      const std::shared_ptr<Channel>& channel, uint64_t id,
      const Status& status);

  // Which end of a call a callback reports (Report).
  enum class CallEnd { kFinalSent, kReleased };
  // Records that `end` of `call` happened. The report that completes the
  // pair takes the call out of the table, which frees it: after Report
  // the caller must not touch `call`. Returns false when `end` had been
  // reported already (nothing changes).
  bool Report(BlsCall* call, CallEnd end) EXCLUDES(mu);

  // Why a new call with `bytes` of inputs may not start ("": it may).
  // Only the reader thread adds calls, so the answer holds until it puts
  // the call in the table (others only take calls out; outputs may add a
  // little). Over a cap, it first waits (kReleaseWait at most) for the
  // calls already answered to be released.
  std::string RefuseCall(const std::string& model, uint64_t bytes) EXCLUDES(mu);
  // Whether call `id` is in the table.
  bool InTable(uint64_t id) EXCLUDES(mu);
  // Puts `call` in the table (its id is not there).
  void Insert(const std::shared_ptr<BlsCall>& call) EXCLUDES(mu);
  // Takes `call` out of the table, if it is there (Triton never took it).
  void Remove(const BlsCall* call) EXCLUDES(mu);

  // Places output `name` of `call` in a BLS arena (*ob set in_arena),
  // announcing a new arena to the stub first. Leaves *ob as it is when
  // `call` belongs to a stub that is gone. Returns Triton's error when the
  // output would pass stub-max-bls-bytes or no arena space is left.
  TRITONSERVER_Error* AllocateInArena(
      BlsCall* call, const char* name, size_t byte_size, OutBuf* ob)
      EXCLUDES(mu);
  // The stub owns `bufs` from now on (it frees them with BLS_RELEASE).
  void HandOver(const std::vector<OutBuf*>& bufs) EXCLUDES(mu);
  // The frame that referred to `bufs` was not sent: they are ours again,
  // unless OnStubGone freed them meanwhile.
  void TakeBack(const std::vector<OutBuf*>& bufs) EXCLUDES(mu);
  // Frees the arena space of `ob`, which never reached the stub.
  void FreeOutput(const OutBuf& ob) EXCLUDES(mu);

  TRITONSERVER_Server* const server;
  const std::string describe;
  const StubLimits limits;  // the BLS caps
  // Set once, by Bls before any call starts.
  TRITONSERVER_ResponseAllocator* triton_allocator = nullptr;

  // A call in the table, with the ends its callbacks reported.
  struct CallEntry {
    std::shared_ptr<BlsCall> call;
    bool final_sent = false;
    bool released = false;
  };

  Mutex mu;
  CondVar cv{&mu};  // signalled when a call leaves the table
  ArenaAllocator allocator GUARDED_BY(mu);
  // The channel of the stub that runs now; outputs of calls of a stub
  // that is gone never go to an arena.
  std::shared_ptr<Channel> current GUARDED_BY(mu);
  // The stub the arenas were announced to.
  std::shared_ptr<Channel> announced_to GUARDED_BY(mu);
  // Arena space the stub holds: (arena id, offset).
  std::set<std::pair<uint32_t, uint64_t>> handed GUARDED_BY(mu);
  std::map<uint64_t, CallEntry> calls GUARDED_BY(mu);  // by call id
  uint64_t input_bytes GUARDED_BY(mu) = 0;  // of the calls in the table
  // How often RefuseCall waited for answered calls to be released.
  uint64_t release_waits GUARDED_BY(mu) = 0;

  // Brings `usage` up to date after the table or the allocator changed.
  void Recount() REQUIRES(mu);

 private:
  // Bytes of BLS data held for the stub: input copies of the calls in
  // the table and outputs in the BLS arenas.
  uint64_t HeldBytes() REQUIRES(mu)
  {
    return input_bytes + allocator.allocated_bytes();
  }
  // Takes the entry out of the table (its bytes out of input_bytes).
  void Erase(std::map<uint64_t, CallEntry>::iterator it) REQUIRES(mu);
  // Calls whose final response is in and whose request is not released.
  size_t AnsweredNotReleased() REQUIRES(mu);
  // How long a call that would pass a cap waits for those releases.
  static constexpr std::chrono::milliseconds kReleaseWait{1000};
  // The calls and bytes the caps see: with a shared usage, the stub's and
  // its children's together.
  uint64_t CallsForCaps() REQUIRES(mu)
  {
    return usage_ == nullptr
               ? calls.size()
               : usage_->bls_calls.load() - counted_calls_ + calls.size();
  }
  uint64_t BytesForCaps() REQUIRES(mu)
  {
    return usage_ == nullptr
               ? HeldBytes()
               : usage_->bls_bytes.load() - counted_bytes_ + HeldBytes();
  }

  const std::shared_ptr<StubUsage> usage_;
  uint64_t counted_calls_ GUARDED_BY(mu) = 0;  // what usage_ holds of ours
  uint64_t counted_bytes_ GUARDED_BY(mu) = 0;
};

// Triton's callbacks of a BLS call (bls_response.cc), each behind an
// exception barrier; `userp` is the BlsCall. The response allocator's:
TRITONSERVER_Error* BlsOutputAlloc(
    TRITONSERVER_ResponseAllocator* allocator, const char* name,
    size_t byte_size, TRITONSERVER_MemoryType type, int64_t type_id,
    void* userp, void** buffer, void** buffer_userp,
    TRITONSERVER_MemoryType* actual_type, int64_t* actual_type_id);
TRITONSERVER_Error* BlsOutputRelease(
    TRITONSERVER_ResponseAllocator* allocator, void* buffer, void* buffer_userp,
    size_t byte_size, TRITONSERVER_MemoryType type, int64_t type_id);
// Each response becomes one BLS_RESPONSE.
void BlsOnResponse(
    TRITONSERVER_InferenceResponse* response, const uint32_t flags,
    void* userp);
void BlsOnRequestRelease(
    TRITONSERVER_InferenceRequest* request, const uint32_t flags, void* userp);

}  // namespace tritonpy
