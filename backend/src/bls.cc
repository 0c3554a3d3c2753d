// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "bls.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <utility>

#include "barrier.h"
#include "bls_request.h"
#include "json.h"
#include "mutex.h"
#include "params.h"
#include "triton_util.h"
#include "tritonpy/triton_infer_api.h"

namespace tritonpy {

class BlsCore;

namespace {

// Outputs up to this size are sent inline (one copy, no BLS_RELEASE round
// trip); larger ones stay where Triton wrote them, in a BLS arena.
constexpr size_t kInlineOutputMax = 16 << 10;
// Inline bytes one BLS_RESPONSE may carry; the rest goes to the arena.
constexpr size_t kInlineBudget = 96 << 10;
// How long ~Bls waits for cancelled calls to be given back by Triton.
constexpr auto kDrainWait = std::chrono::seconds(5);
// MODEL_CONTROL requests one stub may have waiting or running; past this
// the stub is killed (docs/hardening.md).
constexpr size_t kMaxModelControlInFlight = 64;

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

// Where Triton wrote one output: an arena allocation, or call-owned heap
// memory for small outputs (and for calls whose stub is gone).
struct OutBuf {
  std::shared_ptr<BlsCore> core;  // set for arena allocations
  bool in_arena = false;
  Allocation alloc;
  std::vector<uint8_t> heap;
  // Set once the stub was sent a reference: then the stub frees it.
  bool handed_over = false;
};

}  // namespace

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
};

class BlsCore : public std::enable_shared_from_this<BlsCore> {
 public:
  BlsCore(
      TRITONSERVER_Server* server, std::string describe, uint64_t size,
      bool model_control, const StubLimits& limits)
      : server(server),
        describe(std::move(describe)),
        model_control(model_control),
        limits(limits),
        allocator(size)
  {
  }
  ~BlsCore()
  {
    if (triton_allocator != nullptr) {
      TRITONSERVER_Error* err =
          TRITONSERVER_ResponseAllocatorDelete(triton_allocator);
      if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    }
  }

  // Triton callbacks (any thread). Each runs its body (the *Body twin)
  // behind an exception barrier.
  static TRITONSERVER_Error* Alloc(
      TRITONSERVER_ResponseAllocator*, const char* name, size_t byte_size,
      TRITONSERVER_MemoryType, int64_t, void* userp, void** buffer,
      void** buffer_userp, TRITONSERVER_MemoryType* actual_type,
      int64_t* actual_type_id);
  static TRITONSERVER_Error* AllocBody(
      TRITONSERVER_ResponseAllocator*, const char* name, size_t byte_size,
      TRITONSERVER_MemoryType, int64_t, void* userp, void** buffer,
      void** buffer_userp, TRITONSERVER_MemoryType* actual_type,
      int64_t* actual_type_id);
  static TRITONSERVER_Error* Release(
      TRITONSERVER_ResponseAllocator*, void* buffer, void* buffer_userp,
      size_t byte_size, TRITONSERVER_MemoryType, int64_t);
  static void OnResponse(
      TRITONSERVER_InferenceResponse* response, const uint32_t flags,
      void* userp);
  // Sets *deleted once it deleted `response`.
  static void OnResponseBody(
      TRITONSERVER_InferenceResponse* response, const uint32_t flags,
      void* userp, bool* deleted);
  static void OnRequestRelease(
      TRITONSERVER_InferenceRequest* request, const uint32_t flags,
      void* userp);

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

  // The model-control worker's body: runs queued MODEL_CONTROL requests
  // one at a time until stopped.
  void RunControlJobs();

  // Bytes of BLS data held for the stub: input copies of the calls in
  // the table and outputs in the BLS arenas.
  uint64_t HeldBytes() REQUIRES(mu)
  {
    return input_bytes + allocator.allocated_bytes();
  }
  // Why a new call with `bytes` of inputs may not start ("": it may).
  std::string RefuseCall(const std::string& model, uint64_t bytes) REQUIRES(mu);

  TRITONSERVER_Server* server;
  std::string describe;
  const bool model_control;  // stub-model-control
  const StubLimits limits;   // the BLS caps
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
  std::shared_ptr<Channel> current GUARDED_BY(mu);
  std::shared_ptr<Channel> announced_to GUARDED_BY(mu);
  std::set<std::pair<uint32_t, uint64_t>> handed GUARDED_BY(mu);
  std::map<uint64_t, CallEntry> calls GUARDED_BY(mu);  // by call id
  uint64_t input_bytes GUARDED_BY(mu) = 0;  // of the calls in the table

  // Takes the entry out of the table (its bytes out of input_bytes).
  void Erase(std::map<uint64_t, CallEntry>::iterator it) REQUIRES(mu)
  {
    input_bytes -= it->second.call->inputs.size();
    calls.erase(it);
  }

  // The model-control worker (one per instance, started with its first
  // request, joined by ~Bls) and its queue: a slow load never stalls the
  // reader, and a stub cannot make the backend start threads at will.
  struct ControlJob {
    std::shared_ptr<Channel> channel;
    uint64_t id;
    std::shared_ptr<json::Value> msg;
  };
  std::mutex control_mu;
  std::condition_variable control_cv;
  std::deque<ControlJob> control_jobs;  // guarded by control_mu
  size_t control_running = 0;           // guarded by control_mu
  bool control_stop = false;            // guarded by control_mu
  std::thread control_thread;           // started under control_mu
};

void
BlsCore::RunControlJobs()
{
  pthread_setname_np(pthread_self(), "tritonpy-control");
  std::unique_lock<std::mutex> lock(control_mu);
  while (true) {
    control_cv.wait(
        lock, [&] { return control_stop || !control_jobs.empty(); });
    if (control_stop) return;
    ControlJob job = std::move(control_jobs.front());
    control_jobs.pop_front();
    control_running = 1;
    lock.unlock();
    // The barrier of this thread: a failure is the request's answer.
    json::Value reply;
    Status s = Guarded("model control", [&] {
      reply = RunModelControl(server, *job.msg);
      std::string out = json::Write(reply);
      auto frame = proto::MakeFrame(
          proto::FrameType::kModelControlDone, 0, job.id,
          [&](std::vector<uint8_t>* o) { proto::EncodeJson(out, o); });
      if (job.channel != nullptr) (void)job.channel->Send(frame);
      return Status();
    });
    if (!s.ok()) {
      TRITONPY_LOG_ERROR("tritonpy: " + describe + ": " + s.message());
      (void)Guarded("model control", [&] {
        const std::string out = json::Write(
            json::Value{
                {"ok", false},
                // JSON writes a byte as at most 6: the frame stays inline.
                {"error",
                 proto::ClipText(s.message(), proto::kMaxBackendText / 6)},
                {"ready", false}});
        auto frame = proto::MakeFrame(
            proto::FrameType::kModelControlDone, 0, job.id,
            [&](std::vector<uint8_t>* o) { proto::EncodeJson(out, o); });
        if (job.channel != nullptr) (void)job.channel->Send(frame);
        return Status();
      });
    }
    job = ControlJob();  // its channel is let go outside the lock
    lock.lock();
    control_running = 0;
  }
}

TRITONSERVER_Error*
BlsCore::Alloc(
    TRITONSERVER_ResponseAllocator* allocator, const char* name,
    size_t byte_size, TRITONSERVER_MemoryType type, int64_t type_id,
    void* userp, void** buffer, void** buffer_userp,
    TRITONSERVER_MemoryType* actual_type, int64_t* actual_type_id)
{
  TRITONSERVER_Error* err = nullptr;
  Status s = Guarded("BLS output allocation", [&] {
    err = AllocBody(
        allocator, name, byte_size, type, type_id, userp, buffer, buffer_userp,
        actual_type, actual_type_id);
    return Status();
  });
  if (s.ok()) return err;
  *buffer = nullptr;
  *buffer_userp = nullptr;
  return ToTriton(s);
}

TRITONSERVER_Error*
BlsCore::AllocBody(
    TRITONSERVER_ResponseAllocator*, const char* name, size_t byte_size,
    TRITONSERVER_MemoryType, int64_t, void* userp, void** buffer,
    void** buffer_userp, TRITONSERVER_MemoryType* actual_type,
    int64_t* actual_type_id)
{
  auto* call = static_cast<BlsCall*>(userp);
  BlsCore* core = call->core.get();
  *actual_type = TRITONSERVER_MEMORY_CPU;
  *actual_type_id = 0;
  *buffer = nullptr;
  *buffer_userp = nullptr;
  if (byte_size == 0) return nullptr;
  auto ob = std::make_unique<OutBuf>();
  if (byte_size > kInlineOutputMax) {
    MutexLock lock(&core->mu);
    // Only a call of the current stub may use the arenas (a dead stub's
    // responses are dropped anyway).
    if (call->channel == core->current) {
      if (core->announced_to != call->channel) {
        core->allocator.MarkAllUnannounced();
        core->announced_to = call->channel;
      }
      const uint64_t most = core->limits.max_bls_bytes;
      const uint64_t held = core->HeldBytes();
      if (byte_size > most || held > most - byte_size) {
        return TRITONSERVER_ErrorNew(
            TRITONSERVER_ERROR_UNAVAILABLE,
            ("tritonpy: " + core->describe + ": BLS output '" + name + "' of " +
             std::to_string(byte_size) + " bytes would take the " +
             "BLS data held for this instance (" + std::to_string(held) +
             " bytes) past stub-max-bls-bytes=" + std::to_string(most))
                .c_str());
      }
      Status s = core->allocator.Allocate(byte_size, &ob->alloc);
      if (!s.ok()) {
        return TRITONSERVER_ErrorNew(
            TRITONSERVER_ERROR_INTERNAL,
            ("tritonpy: " + core->describe + ": no shared memory for BLS " +
             "output '" + name + "': " + s.message())
                .c_str());
      }
      ob->in_arena = true;
      ob->core = call->core;
      // A new arena goes to the stub before any frame refers to it; sent
      // under mu so that no other response can overtake it.
      for (const MappedArena* arena : core->allocator.Unannounced()) {
        auto frame = proto::MakeFrame(
            proto::FrameType::kBlsArena, 0, 0, [&](std::vector<uint8_t>* out) {
              proto::EncodeArena({arena->id(), arena->size()}, out);
            });
        (void)call->channel->Send(frame, arena->fd());
        core->allocator.MarkAnnounced(arena->id());
      }
      *buffer = ob->alloc.ptr;
    }
  }
  if (!ob->in_arena) {
    ob->heap.resize(byte_size);
    *buffer = ob->heap.data();
  }
  *buffer_userp = ob.release();
  return nullptr;
}

TRITONSERVER_Error*
BlsCore::Release(
    TRITONSERVER_ResponseAllocator* allocator, void*, void* buffer_userp,
    size_t, TRITONSERVER_MemoryType, int64_t)
{
  (void)allocator;
  return ToTriton(Guarded("BLS output release", [&] {
    auto* ob = static_cast<OutBuf*>(buffer_userp);
    if (ob == nullptr) return Status();
    if (ob->in_arena && !ob->handed_over) {
      // Never reached the stub (an error response, a dead stub): ours to
      // free.
      MutexLock lock(&ob->core->mu);
      ob->core->allocator.Free(ob->alloc.arena_id, ob->alloc.offset);
    }
    delete ob;
    return Status();
  }));
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
  auto frame = proto::MakeFrame(
      proto::FrameType::kBlsResponse, 0, id,
      [&](std::vector<uint8_t>* out) { proto::EncodeBlsResponse(body, out); });
  if (channel != nullptr) (void)channel->Send(frame);
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

void
BlsCore::OnResponse(
    TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp)
{
  auto* call = static_cast<BlsCall*>(userp);
  std::shared_ptr<BlsCore> core = call->core;  // alive through this call
  bool deleted = false;
  const Status s = Guarded("BLS response", [&] {
    OnResponseBody(response, flags, userp, &deleted);
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
    if (core->Report(call, CallEnd::kFinalSent)) FailEarly(channel, id, s);
    return Status();
  });
}

void
BlsCore::OnResponseBody(
    TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp,
    bool* deleted)
{
  auto* call = static_cast<BlsCall*>(userp);
  std::shared_ptr<BlsCore> core = call->core;     // alive through this call
  InjectFault(call->model_name, "BLS_RESPONSE");  // the called model's name
  proto::BlsResponseBody body;
  const bool final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  body.response_flags = final ? proto::kRespFinal : 0;
  std::vector<OutBuf*> arena_bufs;
  if (response != nullptr) {
    TRITONSERVER_Error* rerr = TRITONSERVER_InferenceResponseError(response);
    if (rerr != nullptr) {
      body.has_error = 1;
      body.error_code = static_cast<uint32_t>(TRITONSERVER_ErrorCode(rerr));
      body.error_message = TRITONSERVER_ErrorMessage(rerr);
    } else {
      TRITONSERVER_Error* err =
          ToTriton(BlsResponseParametersToJson(response, &body.parameters));
      uint32_t count = 0;
      if (err == nullptr) {
        err = TRITONSERVER_InferenceResponseOutputCount(response, &count);
      }
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
            response, i, &name, &dtype, &shape, &ndim, &base, &byte_size,
            &mtype, &mtype_id, &buf_userp);
        if (err != nullptr) break;
        t.name = name;
        t.dtype = static_cast<uint32_t>(dtype);
        t.dims.assign(shape, shape + ndim);
        t.byte_size = byte_size;
        auto* ob = static_cast<OutBuf*>(buf_userp);
        if (mtype == TRITONSERVER_MEMORY_GPU) {
          err = TRITONSERVER_ErrorNew(
              TRITONSERVER_ERROR_UNSUPPORTED,
              ("tritonpy: BLS output '" + t.name + "' is in GPU memory")
                  .c_str());
          break;
        }
        if (ob != nullptr && ob->in_arena) {
          t.location = proto::kLocationArena;
          t.ref.arena_id = ob->alloc.arena_id;
          t.ref.offset = ob->alloc.offset;
          arena_bufs.push_back(ob);
        } else if (byte_size <= budget) {
          t.location = proto::kLocationInline;
          t.data = static_cast<const uint8_t*>(base);
          budget -= byte_size;
        } else {
          err = TRITONSERVER_ErrorNew(
              TRITONSERVER_ERROR_INTERNAL,
              ("tritonpy: BLS output '" + t.name + "' does not fit in a " +
               "response frame")
                  .c_str());
          break;
        }
        body.outputs.push_back(std::move(t));
      }
      if (err != nullptr) {
        body.outputs.clear();
        arena_bufs.clear();
        body.parameters.clear();
        body.has_error = 1;
        body.error_code = static_cast<uint32_t>(TRITONSERVER_ErrorCode(err));
        body.error_message = TRITONSERVER_ErrorMessage(err);
        TRITONSERVER_ErrorDelete(err);
      }
    }
  }
  auto frame = proto::MakeFrame(
      proto::FrameType::kBlsResponse, 0, call->id,
      [&](std::vector<uint8_t>* out) { proto::EncodeBlsResponse(body, out); });
  if (frame.size() > proto::kMaxFrame) {
    // Huge response parameters or many inline outputs: the stub gets this
    // response as an error naming the called model instead, so that its
    // call still ends (an unsent final response would leave it waiting).
    // The arena space stays ours and is freed with the response.
    body = TooLargeResponse(call->model_name, body, frame.size());
    arena_bufs.clear();
    frame = proto::MakeFrame(
        proto::FrameType::kBlsResponse, 0, call->id,
        [&](std::vector<uint8_t>* out) {
          proto::EncodeBlsResponse(body, out);
        });
  }
  // The stub owns the arena space from the moment it may see the frame.
  {
    MutexLock lock(&core->mu);
    for (OutBuf* ob : arena_bufs) {
      ob->handed_over = true;
      core->handed.insert({ob->alloc.arena_id, ob->alloc.offset});
    }
  }
  Status sent = call->channel->Send(frame);
  if (!sent.ok()) {
    MutexLock lock(&core->mu);
    for (OutBuf* ob : arena_bufs) {
      // Not delivered: give it back to Release, unless OnStubGone freed it.
      ob->handed_over =
          core->handed.erase({ob->alloc.arena_id, ob->alloc.offset}) == 0;
    }
  }
  if (response != nullptr) {
    // Release (called from here) frees the arena space not handed over.
    *deleted = true;
    TRITONSERVER_Error* e = TRITONSERVER_InferenceResponseDelete(response);
    if (e != nullptr) TRITONSERVER_ErrorDelete(e);
  }
  if (final) (void)core->Report(call, CallEnd::kFinalSent);
}

void
BlsCore::OnRequestRelease(
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
    (void)core->Report(call, CallEnd::kReleased);
    return Status();
  });
  if (!s.ok()) {
    TRITONPY_LOG_ERROR("tritonpy: " + core->describe + ": " + s.message());
  }
}

std::string
BlsCore::RefuseCall(const std::string& model, uint64_t bytes)
{
  const std::string head = "tritonpy: " + describe +
                           ": BLS request to model '" + model + "' refused: ";
  if (calls.size() >= limits.max_bls_calls) {
    return head + std::to_string(calls.size()) +
           " BLS calls of this instance are in flight, the most "
           "stub-max-bls-calls=" +
           std::to_string(limits.max_bls_calls) + " allows";
  }
  const uint64_t held = HeldBytes();
  if (bytes > limits.max_bls_bytes || held > limits.max_bls_bytes - bytes) {
    return head + "its " + std::to_string(bytes) +
           " input bytes would take the BLS data held for this instance (" +
           std::to_string(held) + " bytes) past stub-max-bls-bytes=" +
           std::to_string(limits.max_bls_bytes);
  }
  return "";
}

// ---------------------------------------------------------------- Bls

Bls::Bls(
    TRITONSERVER_Server* server, std::string describe, uint64_t arena_byte_size,
    bool model_control, const StubLimits& limits)
    : core_(
          std::make_shared<BlsCore>(
              server, std::move(describe), arena_byte_size, model_control,
              limits))
{
  TRITONSERVER_Error* err = TRITONSERVER_ResponseAllocatorNew(
      &core_->triton_allocator, BlsCore::Alloc, BlsCore::Release, nullptr);
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
  std::thread worker;
  {
    std::lock_guard<std::mutex> lock(core_->control_mu);
    core_->control_stop = true;
    core_->control_jobs.clear();
    worker.swap(core_->control_thread);
  }
  core_->control_cv.notify_all();
  if (worker.joinable()) {
    // A load run by the worker itself may end with this instance's
    // destruction: then the worker finishes on its own.
    if (worker.get_id() == std::this_thread::get_id()) {
      worker.detach();
    } else {
      worker.join();
    }
  }
}

void
Bls::DebugCounters(uint64_t* calls, uint64_t* arena_bytes) const
{
  MutexLock lock(&core_->mu);
  *calls = core_->calls.size();
  *arena_bytes = core_->allocator.allocated_bytes();
}

void
Bls::OnStubGone()
{
  {
    // Model-control requests of the dead stub not started yet are dropped.
    std::lock_guard<std::mutex> lock(core_->control_mu);
    core_->control_jobs.clear();
  }
  std::vector<std::shared_ptr<BlsCall>> calls;
  {
    MutexLock lock(&core_->mu);
    core_->current = nullptr;
    core_->announced_to = nullptr;
    for (const auto& h : core_->handed) {
      core_->allocator.Free(h.first, h.second);
    }
    core_->handed.clear();
    for (auto& kv : core_->calls) calls.push_back(kv.second.call);
  }
  for (auto& call : calls) {
    MutexLock lock(&call->mu);
    if (call->request != nullptr) {
      TRITONSERVER_Error* err =
          TRITONSERVER_InferenceRequestCancel(call->request);
      if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    }
  }
}

Status
Bls::OnFrame(
    const proto::FrameView& f, const uint8_t* body, const PeerArenas& peers,
    const std::shared_ptr<Channel>& channel,
    std::vector<proto::ArenaRef>* release, const TraceOf& trace_of)
{
  BlsCore* core = core_.get();
  {
    MutexLock lock(&core->mu);
    core->current = channel;
  }
  switch (f.type) {
    case proto::FrameType::kBlsRelease: {
      proto::ReleaseBody rb;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeRelease(body, f.body_len, &rb));
      MutexLock lock(&core->mu);
      for (const proto::ArenaRef& r : rb.allocations) {
        if (core->handed.erase({r.arena_id, r.offset}) == 0) {
          return Violation(
              "BLS_RELEASE of an allocation the stub does not hold (arena " +
              std::to_string(r.arena_id) + " offset " +
              std::to_string(r.offset) + ")");
        }
        core->allocator.Free(r.arena_id, r.offset);
      }
      return Status();
    }
    case proto::FrameType::kBlsCancel: {
      TRITONPY_RETURN_IF_ERROR(proto::DecodeEmpty(body, f.body_len));
      std::shared_ptr<BlsCall> call;
      {
        MutexLock lock(&core->mu);
        auto it = core->calls.find(f.id);
        // Nothing to cancel once the final response went out.
        if (it != core->calls.end() && !it->second.final_sent) {
          call = it->second.call;
        }
      }
      if (call == nullptr) return Status();  // already over
      MutexLock lock(&call->mu);
      if (call->request != nullptr) {
        TRITONSERVER_Error* err =
            TRITONSERVER_InferenceRequestCancel(call->request);
        if (err != nullptr) TRITONSERVER_ErrorDelete(err);
      }
      return Status();
    }
    case proto::FrameType::kModelControl: {
      std::string text;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeJson(body, f.body_len, &text));
      auto msg = std::make_shared<json::Value>();
      Status ps = json::Parse(text, msg.get());
      if (!ps.ok() || !msg->is_object()) {
        return Violation("MODEL_CONTROL body is not a JSON object");
      }
      const std::string op = json::GetString(*msg, "op");
      if (!core->model_control && op != "is_ready") {
        // Answered at once: the key is the operator's, not the model's.
        const std::string out = json::Write(
            json::Value{
                {"ok", false},
                {"error",
                 "tritonpy: the model loading API is turned off "
                 "(backend config stub-model-control=false)"},
                {"ready", false}});
        auto frame = proto::MakeFrame(
            proto::FrameType::kModelControlDone, 0, f.id,
            [&](std::vector<uint8_t>* o) { proto::EncodeJson(out, o); });
        if (channel != nullptr) (void)channel->Send(frame);
        return Status();
      }
      std::lock_guard<std::mutex> lock(core->control_mu);
      if (core->control_jobs.size() + core->control_running >=
          kMaxModelControlInFlight) {
        return Violation(
            "more than " + std::to_string(kMaxModelControlInFlight) +
            " MODEL_CONTROL requests in flight (load_model, unload_model "
            "and is_model_ready calls not answered yet)");
      }
      if (!core->control_thread.joinable()) {
        std::shared_ptr<BlsCore> keep = core_;  // the thread's own
        core->control_thread = std::thread([keep] {
          const Status s = Guarded("model control", [&] {
            keep->RunControlJobs();
            return Status();
          });
          if (!s.ok()) {
            TRITONPY_LOG_ERROR(
                "tritonpy: " + keep->describe +
                ": the model-control worker stopped: " + s.message());
          }
        });
      }
      core->control_jobs.push_back({channel, f.id, std::move(msg)});
      core->control_cv.notify_one();
      return Status();
    }
    case proto::FrameType::kBlsRequest:
      break;
    default:
      return Violation("not a BLS frame");
  }

  proto::BlsRequestBody rb;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeBlsRequest(body, f.body_len, &rb));
  const proto::Request& q = rb.request;
  // Copy the inputs: the frame buffer is reused and the stub's arena space
  // goes back at once (the Triton request may live longer than the stub).
  // Each input's size is bounded by its arena or the body, but several
  // may name the same arena bytes: the sum is checked against
  // stub-max-arena-bytes (as much as the stub may map at all), which also
  // keeps it from wrapping.
  const uint64_t most = peers.limits().max_arena_bytes;
  uint64_t total = 0;
  std::vector<const uint8_t*> src(q.inputs.size(), nullptr);
  std::vector<uint64_t> offsets(q.inputs.size(), 0);
  for (size_t i = 0; i < q.inputs.size(); ++i) {
    const proto::Tensor& t = q.inputs[i];
    if (t.location == proto::kLocationArena) {
      TRITONPY_RETURN_IF_ERROR(
          peers.Resolve(t.ref.arena_id, t.ref.offset, t.byte_size, &src[i]));
      release->push_back(t.ref);
    } else {
      src[i] = t.data;
    }
    offsets[i] = total;
    // total <= most <= 2^56 holds throughout, so nothing here wraps.
    const bool fits =
        t.byte_size <= most && (t.byte_size + 63) / 64 * 64 <= most - total;
    if (!fits) {
      return Violation(
          "the inputs of BLS call " + std::to_string(f.id) +
          " add up to more than stub-max-arena-bytes=" + std::to_string(most) +
          " (input " + std::to_string(i) + " of " +
          std::to_string(t.byte_size) + " bytes)");
    }
    total += (t.byte_size + 63) / 64 * 64;
  }
  {
    // Only this thread adds calls, so the check holds until the call is
    // in the table (others only take calls out; outputs may add a little).
    MutexLock lock(&core->mu);
    const std::string why = core->RefuseCall(rb.model_name, total);
    if (!why.empty()) {
      BlsCore::FailEarly(channel, f.id, Status::Unavailable(why));
      return Status();
    }
  }
  auto call = std::make_shared<BlsCall>();
  call->core = core_;
  call->channel = channel;
  call->id = f.id;
  call->model_name = rb.model_name;
  try {
    call->inputs.resize(total);
  } catch (const std::bad_alloc&) {
    BlsCore::FailEarly(
        channel, f.id,
        Status::Unavailable(
            "tritonpy: " + core->describe + ": no memory to copy the " +
            std::to_string(total) + " input bytes of a BLS request to " +
            "model '" + rb.model_name + "'"));
    return Status();
  }
  std::vector<const uint8_t*> data(q.inputs.size(), nullptr);
  for (size_t i = 0; i < q.inputs.size(); ++i) {
    const proto::Tensor& t = q.inputs[i];
    if (t.byte_size > 0)
      std::memcpy(call->inputs.data() + offsets[i], src[i], t.byte_size);
    data[i] = call->inputs.data() + offsets[i];
  }
  {
    MutexLock lock(&core->mu);
    if (core->calls.count(f.id) != 0) {
      return Violation(
          "BLS call id " + std::to_string(f.id) + " is already in flight");
    }
  }
  if (core->triton_allocator == nullptr) {
    BlsCore::FailEarly(
        channel, f.id,
        Status::Unavailable(
            "tritonpy: BLS is unavailable in " + core->describe));
    return Status();
  }

  TRITONSERVER_InferenceRequest* req = nullptr;
  Status s = FromTriton(TRITONSERVER_InferenceRequestNew(
      &req, core->server, rb.model_name.c_str(), rb.model_version));
  if (s.ok()) s = BuildBlsRequest(req, q, data);
  if (s.ok()) {
    s = FromTriton(TRITONSERVER_InferenceRequestSetReleaseCallback(
        req, BlsCore::OnRequestRelease, call.get()));
  }
  if (s.ok()) {
    s = FromTriton(TRITONSERVER_InferenceRequestSetResponseCallback(
        req, core->triton_allocator, call.get(), BlsCore::OnResponse,
        call.get()));
  }
  if (s.ok()) {
    {
      MutexLock lock(&core->mu);
      core->calls[f.id].call = call;
      core->input_bytes += call->inputs.size();
    }
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
            "tritonpy: " + core->describe + ": BLS request to model '" +
            rb.model_name + "' is not traced: " + FromTriton(err).message());
        trace = nullptr;
      }
    }
    s = FromTriton(TRITONSERVER_ServerInferAsync(core->server, req, trace));
    if (!s.ok()) {
      {
        MutexLock lock(&core->mu);
        auto it = core->calls.find(f.id);
        if (it != core->calls.end()) core->Erase(it);
      }
      MutexLock lock(&call->mu);
      call->request = nullptr;
    }
  }
  if (!s.ok()) {
    if (req != nullptr) {
      TRITONSERVER_Error* err = TRITONSERVER_InferenceRequestDelete(req);
      if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    }
    // The official backend's wording, so that models matching it still do.
    BlsCore::FailEarly(
        channel, f.id,
        s.WithPrefix(
            "Model " + rb.model_name + " - Error when running inference: "));
  }
  return Status();
}

}  // namespace tritonpy
