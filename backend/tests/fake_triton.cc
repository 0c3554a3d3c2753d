// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// A stand-in for the parts of tritonserver's C API that the fuzz targets'
// and the BLS test's code calls: errors, logging, custom metrics, the
// inference-request calls of BLS, model requests (fake_triton.h) and
// responses. No server behind it: every object is a small heap record, and
// the calls check what a real server would rely on (every input byte handed
// to a request is read, and every output buffer is a heap block of exactly
// the size asked for, so that ASan sees a read or write outside its buffer).
// A BLS request that is started is answered later, by
// FakeTritonCompletePending; or, once a test has called
// fake_triton::AcceptInferences(true), handed to the test (TakeStarted),
// which then plays Triton's callbacks itself.
//
// Thread-safe: MODEL_CONTROL runs on worker threads.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fake_triton.h"
#include "triton_c_api/triton_api.h"
#include "triton_c_api/triton_infer_api.h"
#include "triton_c_api/triton_metric_api.h"

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code;
  std::string message;
};
struct TRITONSERVER_InferenceRequest {
  uint64_t input_bytes = 0;
  std::vector<std::string> requested_outputs;
  TRITONSERVER_InferenceRequestReleaseFn_t release_fn = nullptr;
  void* release_userp = nullptr;
  TRITONSERVER_ResponseAllocator* allocator = nullptr;
  void* allocator_userp = nullptr;
  TRITONSERVER_InferenceResponseCompleteFn_t response_fn = nullptr;
  void* response_userp = nullptr;
};
struct TRITONSERVER_ResponseAllocator {
  TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn = nullptr;
  TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn = nullptr;
};
// A response of the fake server: outputs in buffers its allocator gave.
struct FakeOutput {
  std::string name;
  std::vector<int64_t> shape;
  void* buffer = nullptr;
  void* buffer_userp = nullptr;
  size_t byte_size = 0;
  TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
};
struct TRITONSERVER_InferenceResponse {
  TRITONSERVER_ResponseAllocator* allocator = nullptr;
  TRITONSERVER_Error* error = nullptr;  // owned
  std::vector<FakeOutput> outputs;
  // String parameters: key and value.
  std::vector<std::pair<std::string, std::string>> parameters;
};
struct TRITONSERVER_Parameter {
  std::string name;
};
struct TRITONSERVER_MetricFamily {
  TRITONSERVER_MetricKind kind;
};
struct TRITONSERVER_Metric {
  double value = 0;
};
struct TRITONSERVER_MetricArgs {
  std::vector<double> buckets;
};
struct TRITONBACKEND_Output {
  std::vector<uint8_t> buffer;  // exactly the size asked for: ASan checks it
};
struct TRITONBACKEND_Response {
  TRITONBACKEND_Request* request = nullptr;  // null: from a factory
  std::vector<std::unique_ptr<TRITONBACKEND_Output>> outputs;
};

namespace {

// Read by nothing; keeps the reads of input bytes from being optimised out.
std::atomic<uint64_t> g_sink{0};
std::atomic<uint64_t> g_metric_sets{0};

// fake_triton.h: whether inferences start, and those that did.
std::mutex g_started_mu;
bool g_accept = false;
std::vector<fake_triton::Started> g_started;
std::function<void()> g_on_request_delete;

// Requests ServerInferAsync took, not answered yet.
std::mutex g_pending_mu;
std::vector<TRITONSERVER_InferenceRequest*> g_pending;
std::atomic<uint64_t> g_responses_delivered{0};

TRITONSERVER_Error*
Unavailable(const char* what)
{
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, what);
}

}  // namespace

extern "C" {

TRITONSERVER_Error*
TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg)
{
  return new TRITONSERVER_Error{code, msg != nullptr ? msg : ""};
}

void
TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error)
{
  delete error;
}

TRITONSERVER_Error_Code
TRITONSERVER_ErrorCode(TRITONSERVER_Error* error)
{
  return error->code;
}

const char*
TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error)
{
  return error->message.c_str();
}

bool
TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel)
{
  return true;
}

TRITONSERVER_Error*
TRITONSERVER_LogMessage(
    TRITONSERVER_LogLevel, const char* filename, const int, const char* msg)
{
  // Logged text is read whole, as Triton's logger does.
  g_sink += std::strlen(filename) + std::strlen(msg);
  return nullptr;
}

// ---- inference requests (BLS) ---------------------------------------------

TRITONSERVER_Error*
TRITONSERVER_ResponseAllocatorNew(
    TRITONSERVER_ResponseAllocator** allocator,
    TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,
    TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn,
    TRITONSERVER_ResponseAllocatorStartFn_t)
{
  *allocator = new TRITONSERVER_ResponseAllocator();
  (*allocator)->alloc_fn = alloc_fn;
  (*allocator)->release_fn = release_fn;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ResponseAllocatorDelete(TRITONSERVER_ResponseAllocator* allocator)
{
  delete allocator;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestNew(
    TRITONSERVER_InferenceRequest** inference_request, TRITONSERVER_Server*,
    const char* model_name, const int64_t)
{
  g_sink += std::strlen(model_name);
  *inference_request = new TRITONSERVER_InferenceRequest();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestDelete(
    TRITONSERVER_InferenceRequest* inference_request)
{
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> lock(g_started_mu);
    hook.swap(g_on_request_delete);
  }
  if (hook) hook();
  delete inference_request;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetId(
    TRITONSERVER_InferenceRequest*, const char* id)
{
  g_sink += std::strlen(id);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetCorrelationId(
    TRITONSERVER_InferenceRequest*, uint64_t)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetCorrelationIdString(
    TRITONSERVER_InferenceRequest*, const char* correlation_id)
{
  g_sink += std::strlen(correlation_id);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetFlags(TRITONSERVER_InferenceRequest*, uint32_t)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(
    TRITONSERVER_InferenceRequest*, uint64_t)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestAddInput(
    TRITONSERVER_InferenceRequest*, const char* name,
    const TRITONSERVER_DataType, const int64_t* shape, uint64_t dim_count)
{
  uint64_t sum = std::strlen(name);
  for (uint64_t i = 0; i < dim_count; ++i)
    sum += static_cast<uint64_t>(shape[i]);
  g_sink += sum;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestAppendInputData(
    TRITONSERVER_InferenceRequest* inference_request, const char* name,
    const void* base, size_t byte_size, TRITONSERVER_MemoryType, int64_t)
{
  // A server reads every byte of its inputs.
  const uint8_t* p = static_cast<const uint8_t*>(base);
  uint64_t sum = std::strlen(name);
  for (size_t i = 0; i < byte_size; ++i) sum += p[i];
  g_sink += sum;
  inference_request->input_bytes += byte_size;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestAddRequestedOutput(
    TRITONSERVER_InferenceRequest* inference_request, const char* name)
{
  inference_request->requested_outputs.emplace_back(name);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetReleaseCallback(
    TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_InferenceRequestReleaseFn_t request_release_fn,
    void* request_release_userp)
{
  inference_request->release_fn = request_release_fn;
  inference_request->release_userp = request_release_userp;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetResponseCallback(
    TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_ResponseAllocator* response_allocator,
    void* response_allocator_userp,
    TRITONSERVER_InferenceResponseCompleteFn_t response_fn,
    void* response_userp)
{
  inference_request->allocator = response_allocator;
  inference_request->allocator_userp = response_allocator_userp;
  inference_request->response_fn = response_fn;
  inference_request->response_userp = response_userp;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestCancel(TRITONSERVER_InferenceRequest*)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceTraceSpawnChildTrace(
    TRITONSERVER_InferenceTrace*, TRITONSERVER_InferenceTrace** child_trace)
{
  *child_trace = nullptr;
  return Unavailable("fake server: no tracing");
}

TRITONSERVER_Error*
TRITONSERVER_ServerInferAsync(
    TRITONSERVER_Server*, TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_InferenceTrace*)
{
  {
    std::lock_guard<std::mutex> lock(g_started_mu);
    if (g_accept) {
      g_started.push_back(
          fake_triton::Started{
              inference_request, inference_request->release_fn,
              inference_request->release_userp, inference_request->response_fn,
              inference_request->response_userp});
      return nullptr;
    }
  }
  // Taken: FakeTritonCompletePending answers it later, from the caller's
  // thread, as Triton answers from one of its own.
  std::lock_guard<std::mutex> lock(g_pending_mu);
  g_pending.push_back(inference_request);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseDelete(TRITONSERVER_InferenceResponse* response)
{
  if (response == nullptr) return nullptr;  // a test's flags-only final
  // Triton gives the outputs' buffers back to the allocator that made them.
  for (const FakeOutput& o : response->outputs) {
    TRITONSERVER_Error* err = response->allocator->release_fn(
        response->allocator, o.buffer, o.buffer_userp, o.byte_size, o.type, 0);
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
  }
  if (response->error != nullptr) TRITONSERVER_ErrorDelete(response->error);
  delete response;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseError(TRITONSERVER_InferenceResponse* response)
{
  return response->error;  // owned by the response
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseOutputCount(
    TRITONSERVER_InferenceResponse* response, uint32_t* count)
{
  *count = static_cast<uint32_t>(response->outputs.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseOutput(
    TRITONSERVER_InferenceResponse* response, const uint32_t index,
    const char** name, TRITONSERVER_DataType* datatype, const int64_t** shape,
    uint64_t* dim_count, const void** base, size_t* byte_size,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id, void** userp)
{
  if (index >= response->outputs.size()) return Unavailable("no such output");
  const FakeOutput& o = response->outputs[index];
  *name = o.name.c_str();
  *datatype = TRITONSERVER_TYPE_UINT8;
  *shape = o.shape.data();
  *dim_count = o.shape.size();
  *base = o.buffer;
  *byte_size = o.byte_size;
  *memory_type = o.type;
  *memory_type_id = 0;
  *userp = o.buffer_userp;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseParameterCount(
    TRITONSERVER_InferenceResponse* response, uint32_t* count)
{
  *count = static_cast<uint32_t>(response->parameters.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseParameter(
    TRITONSERVER_InferenceResponse* response, const uint32_t index,
    const char** name, TRITONSERVER_ParameterType* type, const void** vvalue)
{
  if (index >= response->parameters.size()) {
    return Unavailable("fake server: no such response parameter");
  }
  *name = response->parameters[index].first.c_str();
  *type = TRITONSERVER_PARAMETER_STRING;
  *vvalue = response->parameters[index].second.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetStringParameter(
    TRITONSERVER_InferenceRequest*, const char* key, const char* value)
{
  g_sink += std::strlen(key) + std::strlen(value);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetIntParameter(
    TRITONSERVER_InferenceRequest*, const char* key, const int64_t)
{
  g_sink += std::strlen(key);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetBoolParameter(
    TRITONSERVER_InferenceRequest*, const char* key, const bool)
{
  g_sink += std::strlen(key);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetDoubleParameter(
    TRITONSERVER_InferenceRequest*, const char* key, const double)
{
  g_sink += std::strlen(key);
  return nullptr;
}

// ---- model requests and responses ------------------------------------------
// The requests are fake_triton.h's records, filled in by the fuzz target.

TRITONSERVER_Error*
TRITONBACKEND_RequestId(TRITONBACKEND_Request* request, const char** id)
{
  *id = request->id.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request* request, uint64_t* id)
{
  if (request->correlation_is_string) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG, "correlation id is a string");
  }
  *id = request->correlation;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestCorrelationIdString(
    TRITONBACKEND_Request* request, const char** id)
{
  if (!request->correlation_is_string) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG, "correlation id is a number");
  }
  *id = request->correlation_string.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestFlags(TRITONBACKEND_Request* request, uint32_t* flags)
{
  *flags = request->flags;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_InferenceRequestTimeoutMicroseconds(
    TRITONBACKEND_Request* request, uint64_t* timeout)
{
  *timeout = request->timeout_us;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestTrace(
    TRITONBACKEND_Request*, TRITONSERVER_InferenceTrace** trace)
{
  *trace = nullptr;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceTraceContext(TRITONSERVER_InferenceTrace*, const char**)
{
  return Unavailable("fake server: no tracing");
}

TRITONSERVER_Error*
TRITONBACKEND_RequestOutputCount(
    TRITONBACKEND_Request* request, uint32_t* count)
{
  *count = static_cast<uint32_t>(request->outputs.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestOutputName(
    TRITONBACKEND_Request* request, const uint32_t index,
    const char** output_name)
{
  if (index >= request->outputs.size()) return Unavailable("no such output");
  *output_name = request->outputs[index].c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request* request, uint32_t* count)
{
  *count = static_cast<uint32_t>(request->inputs.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestInputByIndex(
    TRITONBACKEND_Request* request, const uint32_t index,
    TRITONBACKEND_Input** input)
{
  if (index >= request->inputs.size()) return Unavailable("no such input");
  *input = request->inputs[index].get();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_InputProperties(
    TRITONBACKEND_Input* input, const char** name,
    TRITONSERVER_DataType* datatype, const int64_t** shape,
    uint32_t* dims_count, uint64_t* byte_size, uint32_t* buffer_count)
{
  if (name != nullptr) *name = input->name.c_str();
  if (datatype != nullptr) *datatype = input->dtype;
  if (shape != nullptr) *shape = input->shape.data();
  if (dims_count != nullptr) {
    *dims_count = static_cast<uint32_t>(input->shape.size());
  }
  if (byte_size != nullptr) *byte_size = input->byte_size;
  if (buffer_count != nullptr) {
    *buffer_count = static_cast<uint32_t>(input->buffers.size());
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_InputBuffer(
    TRITONBACKEND_Input* input, const uint32_t index, const void** buffer,
    uint64_t* buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id)
{
  if (index >= input->buffers.size()) return Unavailable("no such buffer");
  *buffer = input->buffers[index].data();
  *buffer_byte_size = input->buffers[index].size();
  *memory_type = input->gpu ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestParameterCount(
    TRITONBACKEND_Request* request, uint32_t* count)
{
  *count = static_cast<uint32_t>(request->parameters.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestParameter(
    TRITONBACKEND_Request* request, const uint32_t index, const char** key,
    TRITONSERVER_ParameterType* type, const void** vvalue)
{
  if (index >= request->parameters.size()) {
    return Unavailable("no such parameter");
  }
  const FakeParameter& p = request->parameters[index];
  *key = p.key.c_str();
  *type = p.type;
  switch (p.type) {
    case TRITONSERVER_PARAMETER_INT:
      *vvalue = &p.integer;
      break;
    case TRITONSERVER_PARAMETER_BOOL:
      *vvalue = &p.boolean;
      break;
    case TRITONSERVER_PARAMETER_DOUBLE:
      *vvalue = &p.real;
      break;
    default:
      *vvalue = p.text.c_str();
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestIsCancelled(
    TRITONBACKEND_Request* request, bool* is_cancelled)
{
  *is_cancelled = request->cancelled;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryIsCancelled(
    TRITONBACKEND_ResponseFactory* factory, bool* is_cancelled)
{
  *is_cancelled = factory->request != nullptr && factory->request->cancelled;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t flags)
{
  ++request->releases;
  request->release_flags = flags;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request*, const bool,
    const uint64_t, const uint64_t, const uint64_t, const uint64_t)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance*, const uint64_t, const uint64_t,
    const uint64_t, const uint64_t, const uint64_t)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryNew(
    TRITONBACKEND_ResponseFactory** factory, TRITONBACKEND_Request* request)
{
  *factory = new TRITONBACKEND_ResponseFactory();
  (*factory)->request = request;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory* factory)
{
  delete factory;
  return nullptr;
}

namespace {

// A response or flags sent for `request` (null: unknown).
void
CountSend(TRITONBACKEND_Request* request, uint32_t flags)
{
  if (request == nullptr) return;
  if (request->final_flags > 0) ++request->sends_after_final;
  if ((flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0) {
    ++request->final_flags;
  }
}

}  // namespace

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactorySendFlags(
    TRITONBACKEND_ResponseFactory* factory, const uint32_t flags)
{
  CountSend(factory->request, flags);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseNew(
    TRITONBACKEND_Response** response, TRITONBACKEND_Request* request)
{
  *response = new TRITONBACKEND_Response();
  (*response)->request = request;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseNewFromFactory(
    TRITONBACKEND_Response** response, TRITONBACKEND_ResponseFactory* factory)
{
  *response = new TRITONBACKEND_Response();
  (*response)->request = factory->request;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response* response)
{
  delete response;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseOutput(
    TRITONBACKEND_Response* response, TRITONBACKEND_Output** output,
    const char* name, const TRITONSERVER_DataType, const int64_t* shape,
    const uint32_t dims_count)
{
  uint64_t sum = std::strlen(name);
  for (uint32_t i = 0; i < dims_count; ++i)
    sum += static_cast<uint64_t>(shape[i]);
  g_sink += sum;
  response->outputs.emplace_back(new TRITONBACKEND_Output());
  *output = response->outputs.back().get();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_OutputBuffer(
    TRITONBACKEND_Output* output, void** buffer,
    const uint64_t buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id)
{
  if (buffer_byte_size > (uint64_t(1) << 32)) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG, "fake server: output too large");
  }
  output->buffer.resize(buffer_byte_size);
  *buffer = output->buffer.data();
  *memory_type = TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseSend(
    TRITONBACKEND_Response* response, const uint32_t flags,
    TRITONSERVER_Error* error)
{
  if (response->request != nullptr) {
    ++response->request->responses;
    if (error != nullptr) {
      ++response->request->error_responses;
      response->request->last_error = error->message;
    }
  }
  CountSend(response->request, flags);
  // Sent responses are read (the frontend serialises them), then owned by
  // the server.
  uint64_t sum = error != nullptr ? std::strlen(error->message.c_str()) : 0;
  for (const auto& output : response->outputs) {
    for (uint8_t b : output->buffer) sum += b;
  }
  g_sink += sum;
  delete response;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseSetStringParameter(
    TRITONBACKEND_Response*, const char* name, const char* value)
{
  g_sink += std::strlen(name) + std::strlen(value);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseSetIntParameter(
    TRITONBACKEND_Response*, const char* name, const int64_t)
{
  g_sink += std::strlen(name);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseSetBoolParameter(
    TRITONBACKEND_Response*, const char* name, const bool)
{
  g_sink += std::strlen(name);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseSetDoubleParameter(
    TRITONBACKEND_Response*, const char* name, const double)
{
  g_sink += std::strlen(name);
  return nullptr;
}

// ---- parameters, model control ---------------------------------------------

TRITONSERVER_Parameter*
TRITONSERVER_ParameterNew(
    const char* name, const TRITONSERVER_ParameterType, const void*)
{
  return new TRITONSERVER_Parameter{name};
}

TRITONSERVER_Parameter*
TRITONSERVER_ParameterBytesNew(
    const char* name, const void* byte_ptr, const uint64_t size)
{
  const uint8_t* p = static_cast<const uint8_t*>(byte_ptr);
  uint64_t sum = 0;
  for (uint64_t i = 0; i < size; ++i) sum += p[i];
  g_sink += sum;
  return new TRITONSERVER_Parameter{name};
}

void
TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter* parameter)
{
  delete parameter;
}

TRITONSERVER_Error*
TRITONSERVER_ServerLoadModelWithParameters(
    TRITONSERVER_Server*, const char* model_name,
    const TRITONSERVER_Parameter** parameters, const uint64_t parameter_count)
{
  uint64_t sum = std::strlen(model_name);
  for (uint64_t i = 0; i < parameter_count; ++i) {
    sum += parameters[i]->name.size();
  }
  g_sink += sum;
  return Unavailable("fake server: no models");
}

TRITONSERVER_Error*
TRITONSERVER_ServerUnloadModel(TRITONSERVER_Server*, const char* model_name)
{
  g_sink += std::strlen(model_name);
  return Unavailable("fake server: no models");
}

TRITONSERVER_Error*
TRITONSERVER_ServerUnloadModelAndDependents(
    TRITONSERVER_Server*, const char* model_name)
{
  g_sink += std::strlen(model_name);
  return Unavailable("fake server: no models");
}

TRITONSERVER_Error*
TRITONSERVER_ServerModelIsReady(
    TRITONSERVER_Server*, const char* model_name, const int64_t, bool* ready)
{
  g_sink += std::strlen(model_name);
  *ready = false;
  return nullptr;
}

// A model repository that holds no model.
struct TRITONSERVER_Message {
  std::string json;
};

TRITONSERVER_Error*
TRITONSERVER_ServerModelIndex(
    TRITONSERVER_Server*, uint32_t, TRITONSERVER_Message** index)
{
  *index = new TRITONSERVER_Message{"[]"};
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MessageSerializeToJson(
    TRITONSERVER_Message* message, const char** base, size_t* byte_size)
{
  *base = message->json.data();
  *byte_size = message->json.size();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MessageDelete(TRITONSERVER_Message* message)
{
  delete message;
  return nullptr;
}

// ---- custom metrics -------------------------------------------------------

TRITONSERVER_Error*
TRITONSERVER_MetricFamilyNew(
    TRITONSERVER_MetricFamily** family, const TRITONSERVER_MetricKind kind,
    const char* name, const char* description)
{
  g_sink += std::strlen(name) + std::strlen(description);
  *family = new TRITONSERVER_MetricFamily{kind};
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricFamilyDelete(TRITONSERVER_MetricFamily* family)
{
  delete family;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricArgsNew(TRITONSERVER_MetricArgs** args)
{
  *args = new TRITONSERVER_MetricArgs();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricArgsSetHistogram(
    TRITONSERVER_MetricArgs* args, const double* buckets,
    const uint64_t buckets_count)
{
  args->buckets.assign(buckets, buckets + buckets_count);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricArgsDelete(TRITONSERVER_MetricArgs* args)
{
  delete args;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricNewWithArgs(
    TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
    const TRITONSERVER_Parameter** labels, const uint64_t label_count,
    const TRITONSERVER_MetricArgs* args)
{
  uint64_t sum = 0;
  for (uint64_t i = 0; i < label_count; ++i) sum += labels[i]->name.size();
  if (args != nullptr) sum += args->buckets.size();
  g_sink += sum + static_cast<uint64_t>(family->kind);
  *metric = new TRITONSERVER_Metric();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricDelete(TRITONSERVER_Metric* metric)
{
  delete metric;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricIncrement(TRITONSERVER_Metric* metric, double value)
{
  metric->value += value;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricSet(TRITONSERVER_Metric* metric, double value)
{
  ++g_metric_sets;
  metric->value = value;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricObserve(TRITONSERVER_Metric* metric, double value)
{
  metric->value += value;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricValue(TRITONSERVER_Metric* metric, double* value)
{
  *value = metric->value;
  return nullptr;
}

}  // extern "C"

namespace fake_triton {

void
AcceptInferences(bool accept)
{
  std::lock_guard<std::mutex> lock(g_started_mu);
  g_accept = accept;
}

std::vector<Started>
TakeStarted()
{
  std::lock_guard<std::mutex> lock(g_started_mu);
  std::vector<Started> out;
  out.swap(g_started);
  return out;
}

void
OnNextRequestDelete(std::function<void()> hook)
{
  std::lock_guard<std::mutex> lock(g_started_mu);
  g_on_request_delete = std::move(hook);
}

uint64_t
MetricSets()
{
  return g_metric_sets.load();
}

}  // namespace fake_triton

// ---- answering requests
// ------------------------------------------------------

namespace {

// One response to `req` as `script` says: an error, or outputs of sizes
// around the backend's inline and arena limits (and sometimes parameters
// too large for a frame), each buffer asked of the
// request's allocator and filled, as Triton fills it. Null when an
// allocation failed (the response then carries that error).
TRITONSERVER_InferenceResponse*
MakeResponse(TRITONSERVER_InferenceRequest* req, uint8_t script)
{
  static const size_t kSizes[] = {0, 1, 16, 4096, 65536, 65537, 300000};
  auto* response = new TRITONSERVER_InferenceResponse();
  response->allocator = req->allocator;
  if (script % 5 == 4) {
    response->error = TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL, "fake server: the called model failed");
    return response;
  }
  if (script % 7 == 6) {
    // Parameters too large for a BLS_RESPONSE frame (a model may set any).
    response->parameters.emplace_back("big", std::string(200000, 'p'));
  }
  const size_t n = 1 + script % 3;
  for (size_t i = 0; i < n; ++i) {
    FakeOutput o;
    o.name = "OUT" + std::to_string(i);
    o.byte_size = kSizes[(script / 3 + i * 5) % 7];
    o.shape = {static_cast<int64_t>(o.byte_size)};
    TRITONSERVER_MemoryType actual = TRITONSERVER_MEMORY_CPU;
    int64_t actual_id = 0;
    TRITONSERVER_Error* err = req->allocator->alloc_fn(
        req->allocator, o.name.c_str(), o.byte_size, TRITONSERVER_MEMORY_CPU, 0,
        req->allocator_userp, &o.buffer, &o.buffer_userp, &actual, &actual_id);
    if (err != nullptr) {
      response->error = err;
      break;
    }
    o.type = actual;
    if (o.byte_size > 0 && o.buffer == nullptr) {
      response->error = TRITONSERVER_ErrorNew(
          TRITONSERVER_ERROR_INTERNAL, "fake server: no buffer for an output");
      response->outputs.push_back(o);
      break;
    }
    if (o.byte_size > 0) {
      std::memset(o.buffer, 0x5a ^ static_cast<int>(i), o.byte_size);
    }
    response->outputs.push_back(o);
  }
  return response;
}

}  // namespace

uint64_t
FakeTritonCompletePending(const uint8_t* script, size_t len)
{
  std::vector<TRITONSERVER_InferenceRequest*> pending;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    pending.swap(g_pending);
  }
  uint64_t delivered = 0;
  // Where in the script to start: moves on with every call, so that inputs
  // that share their first bytes (a frame's header) still differ here.
  static std::atomic<size_t> calls{0};
  size_t at = calls++ * 7;
  auto next = [&]() -> uint8_t { return len == 0 ? 0 : script[at++ % len]; };
  for (TRITONSERVER_InferenceRequest* req : pending) {
    // Up to three responses, the last one FINAL; or a FINAL flag alone
    // after them (as for a decoupled model).
    const uint8_t plan = next();
    const size_t responses = plan % 4;
    const bool final_alone = responses == 0 || (plan & 0x10) != 0;
    for (size_t i = 0; i < responses; ++i) {
      const bool last = i + 1 == responses && !final_alone;
      req->response_fn(
          MakeResponse(req, next()),
          last ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0, req->response_userp);
      ++delivered;
    }
    if (final_alone) {
      req->response_fn(
          nullptr, TRITONSERVER_RESPONSE_COMPLETE_FINAL, req->response_userp);
      ++delivered;
    }
    // Released after its responses, on the same thread (Triton may also
    // release first, or on another thread: that race is not tried here).
    req->release_fn(req, TRITONSERVER_REQUEST_RELEASE_ALL, req->release_userp);
  }
  g_responses_delivered += delivered;
  return delivered;
}
