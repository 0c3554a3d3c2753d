// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "bls_request.h"

#include <cstdlib>
#include <utility>

#include "params.h"
#include "triton_util.h"

namespace tritonpy {

namespace {

int
Base64Value(char c)
{
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

Status
Base64Decode(const std::string& in, std::string* out)
{
  out->clear();
  out->reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r') continue;
    int v = Base64Value(c);
    if (v < 0) return Status::InvalidArg("file content is not base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return Status();
}

}  // namespace

Status
BuildBlsRequest(
    TRITONSERVER_InferenceRequest* req, const proto::Request& q,
    const std::vector<const uint8_t*>& data)
{
  if (!q.request_id.empty()) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestSetId(req, q.request_id.c_str()));
  }
  if (q.correlation_kind == 1) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestSetCorrelationId(req, q.correlation_u64));
  } else if (q.correlation_kind == 2) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestSetCorrelationIdString(
            req, q.correlation_str.c_str()));
  }
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONSERVER_InferenceRequestSetFlags(req, q.flags));
  if (q.timeout_us > 0) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(req, q.timeout_us));
  }
  TRITONPY_RETURN_IF_ERROR(SetBlsRequestParameters(req, q.parameters));
  for (size_t i = 0; i < q.inputs.size(); ++i) {
    const proto::Tensor& t = q.inputs[i];
    TRITONPY_RETURN_IF_TRITON_ERROR(TRITONSERVER_InferenceRequestAddInput(
        req, t.name.c_str(), static_cast<TRITONSERVER_DataType>(t.dtype),
        t.dims.data(), t.dims.size()));
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestAppendInputData(
            req, t.name.c_str(), data[i], t.byte_size, TRITONSERVER_MEMORY_CPU,
            0));
  }
  for (const std::string& name : q.requested_outputs) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestAddRequestedOutput(req, name.c_str()));
  }
  return Status();
}

json::Value
RunModelControl(TRITONSERVER_Server* server, const json::Value& msg)
{
  const std::string op = json::GetString(msg, "op");
  const std::string name = json::GetString(msg, "model_name");
  Status s;
  bool ready = false;
  if (name.empty()) {
    s = Status::InvalidArg("model_name must not be empty");
  } else if (op == "load") {
    std::string config = json::GetString(msg, "config");
    std::vector<std::pair<std::string, std::string>> files;
    const json::Value* fv = json::Find(msg, "files");
    if (fv != nullptr && fv->is_object()) {
      for (const auto& [key, value] : fv->items()) {
        if (key.rfind("file:", 0) != 0 || !value.is_string()) {
          s = Status::InvalidArg(
              "load_model: every key of 'files' must start with 'file:' "
              "and map to bytes, got '" +
              key + "'");
          break;
        }
        std::string content;
        s = Base64Decode(value.get_ref<const std::string&>(), &content);
        if (!s.ok()) break;
        files.emplace_back(key, std::move(content));
      }
    }
    if (s.ok() && !files.empty() && config.empty()) {
      s = Status::InvalidArg(
          "load_model: 'config' must be given together with 'files'");
    }
    if (s.ok()) {
      std::vector<TRITONSERVER_Parameter*> params;
      if (!config.empty()) {
        params.push_back(TRITONSERVER_ParameterNew(
            "config", TRITONSERVER_PARAMETER_STRING, config.c_str()));
      }
      for (const auto& f : files) {
        params.push_back(TRITONSERVER_ParameterBytesNew(
            f.first.c_str(), f.second.data(), f.second.size()));
      }
      s = FromTriton(TRITONSERVER_ServerLoadModelWithParameters(
          server, name.c_str(),
          const_cast<const TRITONSERVER_Parameter**>(params.data()),
          params.size()));
      for (TRITONSERVER_Parameter* p : params) {
        if (p != nullptr) TRITONSERVER_ParameterDelete(p);
      }
    }
  } else if (op == "unload") {
    s = FromTriton(
        json::GetBool(msg, "unload_dependents")
            ? TRITONSERVER_ServerUnloadModelAndDependents(server, name.c_str())
            : TRITONSERVER_ServerUnloadModel(server, name.c_str()));
  } else if (op == "is_ready") {
    std::string v = json::GetString(msg, "model_version");
    int64_t version = -1;
    if (!v.empty()) {
      char* end = nullptr;
      version = std::strtoll(v.c_str(), &end, 10);
      if (end == nullptr || *end != '\0' || version < 0) {
        s = Status::InvalidArg("model_version '" + v + "' is not a number");
      }
    }
    if (s.ok()) {
      // An unknown model is simply not ready.
      Status r = FromTriton(TRITONSERVER_ServerModelIsReady(
          server, name.c_str(), version, &ready));
      if (!r.ok()) ready = false;
    }
  } else {
    s = Status::InvalidArg("unknown model control operation '" + op + "'");
  }
  // JSON writes a byte as at most 6: the frame stays inline.
  return {
      {"ok", s.ok()},
      {"error", proto::ClipText(s.message(), proto::kMaxBackendText / 6)},
      {"ready", ready}};
}

}  // namespace tritonpy
