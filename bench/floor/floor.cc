// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// "floor": a native Triton backend that implements the benchmark models with
// no Python, so that the bench suite can show what this tritonserver does
// with zero backend overhead. The model kind is chosen by model name, the
// names the bench repository generator uses:
//
//   add_sub, load_probe   OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32)
//   identity, batched     OUTPUT0 = INPUT0 (any type, any shape)
//   async_sleep           OUTPUT0 = INPUT0, answered 10 ms later by a timer
//                         thread (Execute returns at once: many in flight)
//   stream, stream_async  decoupled: N (INT32 [1]) in, N responses TOKEN = i
//                         (INT32 [1]) out, the last one flagged final
//
// Anything else fails to load. Not a template for real backends: errors are
// reported per request and otherwise ignored.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "triton_c_api/triton_api.h"

// Entry points beyond the subset triton_api.h was written for (TRITONBACKEND
// API 1.19); identical redeclarations are harmless if it declares them too.
extern "C" {
struct TRITONBACKEND_ResponseFactory;
typedef struct TRITONBACKEND_ResponseFactory TRITONBACKEND_ResponseFactory;
TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryNew(
    TRITONBACKEND_ResponseFactory** factory, TRITONBACKEND_Request* request);
TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryDelete(
    TRITONBACKEND_ResponseFactory* factory);
TRITONSERVER_Error* TRITONBACKEND_ResponseNewFromFactory(
    TRITONBACKEND_Response** response, TRITONBACKEND_ResponseFactory* factory);
TRITONSERVER_Error* TRITONBACKEND_ResponseFactorySendFlags(
    TRITONBACKEND_ResponseFactory* factory, const uint32_t send_flags);
}

namespace {

enum class Kind { kAddSub, kIdentity, kSleep, kStream };

uint64_t
NowNs()
{
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TRITONSERVER_Error*
Err(const std::string& msg)
{
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg.c_str());
}

#define FLOOR_RETURN_IF_ERROR(X)        \
  do {                                  \
    TRITONSERVER_Error* e__ = (X);      \
    if (e__ != nullptr) return e__;     \
  } while (false)

// One input, its bytes gathered into contiguous memory when Triton hands
// them over in several buffers.
struct Input {
  std::string name;
  TRITONSERVER_DataType dtype;
  std::vector<int64_t> shape;
  const char* data = nullptr;
  uint64_t size = 0;
  std::vector<char> gathered;
};

TRITONSERVER_Error*
ReadInput(TRITONBACKEND_Request* request, uint32_t index, Input* in)
{
  TRITONBACKEND_Input* input;
  FLOOR_RETURN_IF_ERROR(TRITONBACKEND_RequestInputByIndex(request, index, &input));
  const char* name;
  const int64_t* shape;
  uint32_t dims, buffers;
  FLOOR_RETURN_IF_ERROR(TRITONBACKEND_InputProperties(
      input, &name, &in->dtype, &shape, &dims, &in->size, &buffers));
  in->name = name;
  in->shape.assign(shape, shape + dims);
  for (uint32_t b = 0; b < buffers; ++b) {
    const void* ptr;
    uint64_t len;
    TRITONSERVER_MemoryType mtype = TRITONSERVER_MEMORY_CPU;
    int64_t mid = 0;
    FLOOR_RETURN_IF_ERROR(
        TRITONBACKEND_InputBuffer(input, b, &ptr, &len, &mtype, &mid));
    if (buffers == 1) {
      in->data = static_cast<const char*>(ptr);
      return nullptr;
    }
    in->gathered.insert(
        in->gathered.end(), static_cast<const char*>(ptr),
        static_cast<const char*>(ptr) + len);
  }
  in->data = in->gathered.data();
  return nullptr;
}

TRITONSERVER_Error*
AddOutput(
    TRITONBACKEND_Response* response, const char* name,
    TRITONSERVER_DataType dtype, const std::vector<int64_t>& shape,
    uint64_t size, void** buffer)
{
  TRITONBACKEND_Output* output;
  FLOOR_RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(
      response, &output, name, dtype, shape.data(),
      static_cast<uint32_t>(shape.size())));
  TRITONSERVER_MemoryType mtype = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  FLOOR_RETURN_IF_ERROR(
      TRITONBACKEND_OutputBuffer(output, buffer, size, &mtype, &mid));
  if (mtype == TRITONSERVER_MEMORY_GPU) return Err("floor: GPU output buffer");
  return nullptr;
}

TRITONSERVER_Error*
FillAddSub(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response)
{
  Input a, b;
  FLOOR_RETURN_IF_ERROR(ReadInput(request, 0, &a));
  FLOOR_RETURN_IF_ERROR(ReadInput(request, 1, &b));
  if (a.name != "INPUT0") std::swap(a, b);
  if (a.dtype != TRITONSERVER_TYPE_FP32 || a.size != b.size)
    return Err("floor add_sub: expected two FP32 inputs of the same size");
  const size_t n = a.size / sizeof(float);
  void* sum;
  void* diff;
  FLOOR_RETURN_IF_ERROR(AddOutput(
      response, "OUTPUT0", TRITONSERVER_TYPE_FP32, a.shape, a.size, &sum));
  FLOOR_RETURN_IF_ERROR(AddOutput(
      response, "OUTPUT1", TRITONSERVER_TYPE_FP32, a.shape, a.size, &diff));
  const float* x = reinterpret_cast<const float*>(a.data);
  const float* y = reinterpret_cast<const float*>(b.data);
  for (size_t i = 0; i < n; ++i) {
    static_cast<float*>(sum)[i] = x[i] + y[i];
    static_cast<float*>(diff)[i] = x[i] - y[i];
  }
  return nullptr;
}

TRITONSERVER_Error*
FillIdentity(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response)
{
  Input in;
  FLOOR_RETURN_IF_ERROR(ReadInput(request, 0, &in));
  void* out;
  FLOOR_RETURN_IF_ERROR(
      AddOutput(response, "OUTPUT0", in.dtype, in.shape, in.size, &out));
  if (in.size > 0) std::memcpy(out, in.data, in.size);
  return nullptr;
}

// Creates, fills and sends the one response of a default-mode request, then
// releases the request.
void
RespondOnce(
    TRITONBACKEND_Request* request,
    TRITONSERVER_Error* (*fill)(TRITONBACKEND_Request*, TRITONBACKEND_Response*))
{
  TRITONBACKEND_Response* response = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, request);
  if (err == nullptr) {
    TRITONSERVER_Error* fill_err = fill(request, response);
    err = TRITONBACKEND_ResponseSend(
        response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, fill_err);
    if (fill_err != nullptr) TRITONSERVER_ErrorDelete(fill_err);
  }
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);
  TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL);
}

void
Stream(TRITONBACKEND_Request* request)
{
  TRITONBACKEND_ResponseFactory* factory = nullptr;
  if (TRITONBACKEND_ResponseFactoryNew(&factory, request) != nullptr) {
    TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL);
    return;
  }
  Input in;
  int32_t count = 0;
  TRITONSERVER_Error* err = ReadInput(request, 0, &in);
  if (err == nullptr && in.size >= sizeof(int32_t))
    std::memcpy(&count, in.data, sizeof(count));
  TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL);
  if (err != nullptr || count <= 0) {
    TRITONBACKEND_Response* response;
    if (TRITONBACKEND_ResponseNewFromFactory(&response, factory) == nullptr)
      TRITONBACKEND_ResponseSend(
          response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    TRITONBACKEND_ResponseFactoryDelete(factory);
    return;
  }
  const std::vector<int64_t> shape{1};
  for (int32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Response* response;
    if (TRITONBACKEND_ResponseNewFromFactory(&response, factory) != nullptr)
      break;
    void* out;
    TRITONSERVER_Error* fill = AddOutput(
        response, "TOKEN", TRITONSERVER_TYPE_INT32, shape, sizeof(int32_t),
        &out);
    if (fill == nullptr) std::memcpy(out, &i, sizeof(i));
    const uint32_t flags =
        (i + 1 == count) ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0;
    TRITONSERVER_Error* send_err =
        TRITONBACKEND_ResponseSend(response, flags, fill);
    if (fill != nullptr) TRITONSERVER_ErrorDelete(fill);
    if (send_err != nullptr) TRITONSERVER_ErrorDelete(send_err);
  }
  TRITONBACKEND_ResponseFactoryDelete(factory);
}

// Answers async_sleep requests once their deadline has passed, so that one
// instance holds any number of requests in flight.
class Sleeper {
 public:
  Sleeper() : thread_([this] { Run(); }) {}
  ~Sleeper()
  {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Add(TRITONBACKEND_Request* request, uint64_t deadline_ns)
  {
    {
      std::lock_guard<std::mutex> lock(mu_);
      due_.push({deadline_ns, request});
    }
    cv_.notify_one();
  }

 private:
  using Item = std::pair<uint64_t, TRITONBACKEND_Request*>;
  void Run()
  {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (due_.empty()) {
        if (stop_) return;
        cv_.wait(lock);
        continue;
      }
      const uint64_t now = NowNs();
      const Item next = due_.top();
      if (next.first > now && !stop_) {
        cv_.wait_for(lock, std::chrono::nanoseconds(next.first - now));
        continue;
      }
      due_.pop();
      lock.unlock();
      RespondOnce(next.second, FillIdentity);
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> due_;
  bool stop_ = false;
  std::thread thread_;
};

struct ModelState {
  Kind kind;
  Sleeper* sleeper = nullptr;
};

}  // namespace

extern "C" {

TRITONSERVER_Error*
TRITONBACKEND_Initialize(TRITONBACKEND_Backend*)
{
  uint32_t major, minor;
  FLOOR_RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONPY_BACKEND_API_MAJOR ||
      minor < TRITONPY_BACKEND_API_MINOR)
    return Err("floor: unsupported TRITONBACKEND API version");
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  const char* cname;
  FLOOR_RETURN_IF_ERROR(TRITONBACKEND_ModelName(model, &cname));
  const std::string name(cname);
  auto* state = new ModelState;
  if (name == "add_sub" || name == "load_probe") {
    state->kind = Kind::kAddSub;
  } else if (name == "identity" || name == "batched") {
    state->kind = Kind::kIdentity;
  } else if (name == "async_sleep") {
    state->kind = Kind::kSleep;
    state->sleeper = new Sleeper;
  } else if (name == "stream" || name == "stream_async") {
    state->kind = Kind::kStream;
  } else {
    delete state;
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_UNSUPPORTED,
        ("floor has no native model named '" + name + "'").c_str());
  }
  return TRITONBACKEND_ModelSetState(model, state);
}

TRITONSERVER_Error*
TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  void* vstate;
  FLOOR_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &vstate));
  auto* state = static_cast<ModelState*>(vstate);
  if (state == nullptr) return nullptr;  // its initialize failed
  delete state->sleeper;  // answers what is still queued, then joins
  delete state;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance*)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance*)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count)
{
  TRITONBACKEND_Model* model;
  FLOOR_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  void* vstate;
  FLOOR_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &vstate));
  auto* state = static_cast<ModelState*>(vstate);
  const uint64_t start = NowNs();
  // Statistics first: a request must not be touched after its release.
  for (uint32_t r = 0; r < request_count; ++r)
    TRITONBACKEND_ModelInstanceReportStatistics(
        instance, requests[r], true, start, start, start, start);
  TRITONBACKEND_ModelInstanceReportBatchStatistics(
      instance, request_count, start, start, start, start);
  for (uint32_t r = 0; r < request_count; ++r) {
    switch (state->kind) {
      case Kind::kAddSub:
        RespondOnce(requests[r], FillAddSub);
        break;
      case Kind::kIdentity:
        RespondOnce(requests[r], FillIdentity);
        break;
      case Kind::kSleep:
        state->sleeper->Add(requests[r], start + 10'000'000);
        break;
      case Kind::kStream:
        Stream(requests[r]);
        break;
    }
  }
  return nullptr;
}

}  // extern "C"
