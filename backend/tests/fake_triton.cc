// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// A stand-in for the parts of tritonserver's C API that the frame handlers
// under fuzz_dispatch.cc call: errors, logging, custom metrics, the
// inference-request calls of BLS, and model responses. No server behind it:
// every object is a small heap record, and the calls check what a real server
// would rely on (every input byte handed to a request is read, and every output
// buffer is a heap block of exactly the size asked for, so that ASan sees a
// read or write outside its buffer). Starting an inference fails, so a BLS
// request ends in its early-failure path after its inputs were copied.
//
// Thread-safe: MODEL_CONTROL runs on worker threads.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fake_triton.h"
#include "tritonpy/triton_api.h"
#include "tritonpy/triton_infer_api.h"
#include "tritonpy/triton_metric_api.h"

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code;
  std::string message;
};
struct TRITONSERVER_InferenceRequest {
  uint64_t input_bytes = 0;
};
struct TRITONSERVER_ResponseAllocator {
  int unused = 0;
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
struct TRITONBACKEND_ResponseFactory {
  int unused = 0;
};

namespace {

// Read by nothing; keeps the reads of input bytes from being optimised out.
std::atomic<uint64_t> g_sink{0};

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
    TRITONSERVER_ResponseAllocatorAllocFn_t,
    TRITONSERVER_ResponseAllocatorReleaseFn_t,
    TRITONSERVER_ResponseAllocatorStartFn_t)
{
  *allocator = new TRITONSERVER_ResponseAllocator();
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
    TRITONSERVER_InferenceRequest*, const char* name)
{
  g_sink += std::strlen(name);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetReleaseCallback(
    TRITONSERVER_InferenceRequest*, TRITONSERVER_InferenceRequestReleaseFn_t,
    void*)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetResponseCallback(
    TRITONSERVER_InferenceRequest*, TRITONSERVER_ResponseAllocator*, void*,
    TRITONSERVER_InferenceResponseCompleteFn_t, void*)
{
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
    TRITONSERVER_Server*, TRITONSERVER_InferenceRequest*,
    TRITONSERVER_InferenceTrace*)
{
  return Unavailable("fake server: no inference");
}

// Never called: the server never answers (ServerInferAsync fails).
TRITONSERVER_Error*
TRITONSERVER_InferenceResponseDelete(TRITONSERVER_InferenceResponse*)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseError(TRITONSERVER_InferenceResponse*)
{
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseOutputCount(
    TRITONSERVER_InferenceResponse*, uint32_t* count)
{
  *count = 0;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseOutput(
    TRITONSERVER_InferenceResponse*, const uint32_t, const char**,
    TRITONSERVER_DataType*, const int64_t**, uint64_t*, const void**, size_t*,
    TRITONSERVER_MemoryType*, int64_t*, void**)
{
  return Unavailable("fake server: no outputs");
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseParameterCount(
    TRITONSERVER_InferenceResponse*, uint32_t* count)
{
  *count = 0;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseParameter(
    TRITONSERVER_InferenceResponse*, const uint32_t, const char**,
    TRITONSERVER_ParameterType*, const void**)
{
  return Unavailable("fake server: no response parameters");
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
TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t)
{
  ++request->releases;
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
    TRITONBACKEND_ResponseFactory** factory, TRITONBACKEND_Request*)
{
  *factory = new TRITONBACKEND_ResponseFactory();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory* factory)
{
  delete factory;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactorySendFlags(
    TRITONBACKEND_ResponseFactory*, const uint32_t)
{
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
    TRITONBACKEND_Response** response, TRITONBACKEND_ResponseFactory*)
{
  *response = new TRITONBACKEND_Response();
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
    response->request->final_flags +=
        (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0 ? 1 : 0;
  }
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
