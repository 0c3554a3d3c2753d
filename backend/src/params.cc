// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "params.h"

#include <cstdint>

#include "json.h"
#include "triton_util.h"

namespace tritonpy {

namespace {

// Triton reads and writes the parameters of requests and responses through
// functions of the same shape for each kind of object: these templates take
// them as arguments.
template <typename Object>
using CountFn = TRITONSERVER_Error* (*)(Object*, uint32_t*);
template <typename Object>
using GetFn = TRITONSERVER_Error* (*)(
    Object*, uint32_t, const char**, TRITONSERVER_ParameterType*, const void**);

template <typename Object>
struct Setters {
  TRITONSERVER_Error* (*string)(Object*, const char*, const char*);
  TRITONSERVER_Error* (*integer)(Object*, const char*, int64_t);
  TRITONSERVER_Error* (*boolean)(Object*, const char*, bool);
  TRITONSERVER_Error* (*real)(Object*, const char*, double);
};

template <typename Object>
Status
ToJson(
    Object* object, CountFn<Object> count_of, GetFn<Object> get,
    std::string* out)
{
  out->clear();
  uint32_t count = 0;
  TRITONPY_RETURN_IF_TRITON_ERROR(count_of(object, &count));
  if (count == 0) return Status();
  json::Value params = json::Value::object();
  for (uint32_t i = 0; i < count; ++i) {
    const char* key = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    TRITONPY_RETURN_IF_TRITON_ERROR(get(object, i, &key, &type, &value));
    if (key == nullptr || value == nullptr) continue;
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING:
        params[key] = static_cast<const char*>(value);
        break;
      case TRITONSERVER_PARAMETER_INT:
        params[key] = *static_cast<const int64_t*>(value);
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        params[key] = *static_cast<const bool*>(value);
        break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        params[key] = *static_cast<const double*>(value);
        break;
      default:
        break;  // BYTES: no JSON form
    }
  }
  *out = json::Write(params);
  return Status();
}

// `what` ("request", "response") names the parameters in errors.
template <typename Object>
Status
FromJson(
    const std::string& text, const char* what, Object* object,
    const Setters<Object>& set)
{
  if (text.empty()) return Status();
  json::Value doc;
  TRITONPY_RETURN_IF_ERROR(
      json::Parse(text, &doc).WithPrefix(std::string(what) + " parameters: "));
  if (!doc.is_object()) {
    return Status::InvalidArg(
        std::string(what) + " parameters must be a JSON object");
  }
  for (auto it = doc.cbegin(); it != doc.cend(); ++it) {
    const std::string& key = it.key();
    const json::Value& v = it.value();
    const char* name = key.c_str();
    TRITONSERVER_Error* err = nullptr;
    if (v.is_string()) {
      err = set.string(object, name, v.get_ref<const std::string&>().c_str());
    } else if (v.is_boolean()) {
      err = set.boolean(object, name, v.get<bool>());
    } else if (
        v.is_number_integer() &&
        (!v.is_number_unsigned() || v.get<uint64_t>() <= INT64_MAX)) {
      err = set.integer(object, name, v.get<int64_t>());
    } else if (v.is_number()) {
      err = set.real(object, name, v.get<double>());
    } else {
      return Status::InvalidArg(
          std::string(what) + " parameter '" + key +
          "' must be a string, an integer, a bool or a number");
    }
    TRITONPY_RETURN_IF_ERROR(FromTriton(err));
  }
  return Status();
}

}  // namespace

Status
RequestParametersToJson(TRITONBACKEND_Request* request, std::string* out)
{
  return ToJson(
      request, &TRITONBACKEND_RequestParameterCount,
      &TRITONBACKEND_RequestParameter, out);
}

Status
BlsResponseParametersToJson(
    TRITONSERVER_InferenceResponse* response, std::string* out)
{
  return ToJson(
      response, &TRITONSERVER_InferenceResponseParameterCount,
      &TRITONSERVER_InferenceResponseParameter, out);
}

Status
SetResponseParameters(TRITONBACKEND_Response* response, const std::string& text)
{
  static const Setters<TRITONBACKEND_Response> kSetters = {
      &TRITONBACKEND_ResponseSetStringParameter,
      &TRITONBACKEND_ResponseSetIntParameter,
      &TRITONBACKEND_ResponseSetBoolParameter,
      &TRITONBACKEND_ResponseSetDoubleParameter};
  return FromJson(text, "response", response, kSetters);
}

Status
SetBlsRequestParameters(
    TRITONSERVER_InferenceRequest* request, const std::string& text)
{
  static const Setters<TRITONSERVER_InferenceRequest> kSetters = {
      &TRITONSERVER_InferenceRequestSetStringParameter,
      &TRITONSERVER_InferenceRequestSetIntParameter,
      &TRITONSERVER_InferenceRequestSetBoolParameter,
      &TRITONSERVER_InferenceRequestSetDoubleParameter};
  return FromJson(text, "request", request, kSetters);
}

}  // namespace tritonpy
