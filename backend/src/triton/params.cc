// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "triton/params.h"

#include <cstdint>

#include "triton/triton_util.h"
#include "util/json.h"

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

// Hands each member of a flat JSON object of parameters to the setters as
// the parser meets it: no document is built (a model's response with
// parameters runs this). `what` ("request", "response") names the
// parameters in errors; the first failure stops the parse and stays in
// `status`.
template <typename Object>
class ParameterReader {
 public:
  using Json = json::Value;

  ParameterReader(const char* what, Object* object, const Setters<Object>& set)
      : what_(what), object_(object), set_(set)
  {
  }

  Status status;

  bool null() { return Unsupported(); }
  bool boolean(bool v) { return Set(set_.boolean, v); }
  bool number_integer(Json::number_integer_t v) { return Set(set_.integer, v); }
  bool number_unsigned(Json::number_unsigned_t v)
  {
    // Above int64: a double, as any other integer outside int64.
    return v <= INT64_MAX ? Set(set_.integer, static_cast<int64_t>(v))
                          : Set(set_.real, static_cast<double>(v));
  }
  bool number_float(Json::number_float_t v, const Json::string_t&)
  {
    return Set(set_.real, v);
  }
  bool string(Json::string_t& v) { return Set(set_.string, v.c_str()); }
  bool binary(Json::binary_t&) { return Unsupported(); }
  bool start_object(size_t) { return depth_++ == 0 || Unsupported(); }
  bool key(Json::string_t& k)
  {
    key_ = std::move(k);
    return true;
  }
  bool end_object()
  {
    --depth_;
    return true;
  }
  bool start_array(size_t) { return Unsupported(); }
  bool end_array() { return true; }
  bool parse_error(
      size_t, const std::string&, const nlohmann::json::exception& e)
  {
    return Fail(
        json::ParseError(e).WithPrefix(std::string(what_) + " parameters: "));
  }

 private:
  bool Fail(Status s)
  {
    status = std::move(s);
    return false;
  }

  // A value that is not a parameter, or a document that is not an object.
  bool Unsupported()
  {
    if (depth_ == 0) {
      return Fail(
          Status::InvalidArg(
              std::string(what_) + " parameters must be a JSON object"));
    }
    return Fail(
        Status::InvalidArg(
            std::string(what_) + " parameter '" + key_ +
            "' must be a string, an integer, a bool or a number"));
  }

  template <typename T>
  bool Set(TRITONSERVER_Error* (*setter)(Object*, const char*, T), T value)
  {
    if (depth_ == 0) return Unsupported();
    status = FromTriton(setter(object_, key_.c_str(), value));
    return status.ok();
  }

  const char* what_;
  Object* object_;
  const Setters<Object>& set_;
  int depth_ = 0;
  std::string key_;
};

template <typename Object>
Status
FromJson(
    const std::string& text, const char* what, Object* object,
    const Setters<Object>& set)
{
  if (text.empty()) return Status();
  ParameterReader<Object> reader(what, object, set);
  json::Value::sax_parse(text.data(), text.data() + text.size(), &reader);
  return reader.status;
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
