// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Frame codec of the tritonpy IPC protocol. The layout is specified in
// docs/protocol.md (the single source of truth); this file mirrors its frame
// bodies. The constants (frame types, flags, locations, limits, the header's
// layout) are in protocol_wire.h, generated from docs/protocol.toml. Decoding
// is bounds-checked and never reads past the given bytes; encoders append to a
// byte vector.
//
// Inline tensor data and decoded string views are copied out, except
// Tensor::data, which points into the decoded buffer: it stays valid only as
// long as that buffer does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/protocol_wire.h"
#include "util/error.h"

namespace tritonpy {
namespace proto {

// "HELLO" ...; "UNKNOWN" for a value outside the table.
const char* FrameTypeName(FrameType t);
bool IsJsonFrame(FrameType t);

struct ArenaRef {
  uint32_t arena_id = 0;
  uint64_t offset = 0;
};

struct Tensor {
  std::string name;
  uint32_t dtype = 0;
  std::vector<int64_t> dims;
  uint64_t byte_size = 0;
  uint8_t location = kLocationInline;
  const uint8_t* data = nullptr;  // inline: byte_size bytes
  ArenaRef ref;                   // arena: where the bytes are
};

struct Request {
  std::string request_id;
  uint8_t correlation_kind = 0;  // 0 none, 1 u64, 2 string
  uint64_t correlation_u64 = 0;
  std::string correlation_str;
  uint32_t flags = 0;
  uint64_t timeout_us = 0;
  std::string parameters;
  std::vector<std::string> requested_outputs;
  std::vector<Tensor> inputs;
  // EXECUTE: TRITONSERVER_InferenceTraceContext of the request's trace ("":
  // none). BLS_REQUEST: "" (the trace is named by trace_batch_id).
  std::string trace_context;
};

struct Response {
  uint64_t batch_id = 0;
  uint32_t request_index = 0;
  uint32_t response_flags = 0;
  uint8_t has_error = 0;
  uint32_t error_code = 0;
  std::string error_message;
  std::string parameters;
  std::vector<Tensor> outputs;
};

struct ArenaBody {
  uint32_t arena_id = 0;
  uint64_t size = 0;
};
struct ExecuteBody {
  std::vector<Request> requests;
};
struct ResponsesBody {
  std::vector<Response> responses;
};
struct ExecuteDoneBody {
  uint8_t ok = 0;
  std::string error;
};
struct LogBody {
  uint32_t level = 0;
  std::string file;
  uint32_t line = 0;
  std::string message;
};
struct ErrorBody {
  std::string message;
};
struct ReleaseBody {
  std::vector<ArenaRef> allocations;
};
struct RequestRef {
  uint64_t batch_id = 0;
  uint32_t request_index = 0;
};
struct CancelBody {
  std::vector<RequestRef> requests;
};
struct SendErrorBody {
  uint64_t batch_id = 0;
  uint32_t request_index = 0;
  uint32_t error_code = 0;
  std::string message;
};
struct ReadyBody {
  uint8_t ready = 0;
  std::string message;
};
struct LogLevelsBody {
  uint32_t enabled = 0;  // kLogLevelsAll bits
};
// BLS_REQUEST: the call's target, then one request as in EXECUTE.
struct BlsRequestBody {
  std::string model_name;
  int64_t model_version = -1;
  // The request given to execute() whose trace the call continues
  // (trace_batch_id 0: none).
  uint64_t trace_batch_id = 0;
  uint32_t trace_request_index = 0;
  Request request;
};
// BLS_RESPONSE: one response of a call (response_flags: kRespFinal only).
struct BlsResponseBody {
  uint32_t response_flags = 0;
  uint8_t has_error = 0;
  uint32_t error_code = 0;
  std::string error_message;
  std::string parameters;
  std::vector<Tensor> outputs;
};

// METRIC: operations on the stub's metric families and metrics, named by
// stub-chosen handles (docs/protocol.md, "Custom metrics").
struct MetricOp {
  MetricOpCode op = MetricOpCode::kValue;
  uint32_t family = 0;  // FAMILY_NEW, FAMILY_DELETE, METRIC_NEW
  uint32_t metric = 0;  // METRIC_NEW and every metric op
  uint32_t kind = 0;    // FAMILY_NEW
  std::string name;     // FAMILY_NEW
  std::string description;
  std::vector<std::pair<std::string, std::string>> labels;  // METRIC_NEW
  std::vector<double> values;  // METRIC_NEW buckets, OBSERVE values
  double value = 0;            // INCREMENT, SET
};
struct MetricBody {
  std::vector<MetricOp> ops;
};
struct MetricDoneBody {
  uint8_t ok = 0;
  std::string error;
  double value = 0;
};

// A received frame after header validation. When body_in_arena is set the
// body lies in the sender's arena at body_ref (body_len bytes); otherwise
// body/body_len view the message bytes after the header.
struct FrameView {
  FrameType type = FrameType::kHello;
  uint16_t flags = 0;
  uint64_t id = 0;
  uint32_t body_len = 0;
  bool body_in_arena = false;
  ArenaRef body_ref;
  const uint8_t* body = nullptr;
};

// Validates the header of a whole message of `len` bytes (magic, version,
// type, flags, reserved, body_len, MAX_FRAME).
Status DecodeHeader(const uint8_t* msg, size_t len, FrameView* out);

// Body decoders. `body` is the body's first byte; padding is counted from
// it, which equals the frame-relative rule because the header is 24 bytes
// and arena bodies start 8-aligned. Every byte must be consumed.
Status DecodeJson(const uint8_t* body, size_t len, std::string* out);
// Checks a HELLO body (JSON text): an object whose "protocol" is 1.
Status CheckHello(const std::string& json_text);
Status DecodeArena(const uint8_t* body, size_t len, ArenaBody* out);
Status DecodeExecute(const uint8_t* body, size_t len, ExecuteBody* out);
Status DecodeResponses(const uint8_t* body, size_t len, ResponsesBody* out);
Status DecodeExecuteDone(const uint8_t* body, size_t len, ExecuteDoneBody* out);
Status DecodeLog(const uint8_t* body, size_t len, LogBody* out);
Status DecodeError(const uint8_t* body, size_t len, ErrorBody* out);
Status DecodeRelease(const uint8_t* body, size_t len, ReleaseBody* out);
// FINALIZE and IS_READY: the body must be empty.
Status DecodeEmpty(const uint8_t* body, size_t len);
inline Status
DecodeFinalize(const uint8_t* body, size_t len)
{
  return DecodeEmpty(body, len);
}
Status DecodeCancel(const uint8_t* body, size_t len, CancelBody* out);
Status DecodeSendError(const uint8_t* body, size_t len, SendErrorBody* out);
Status DecodeReady(const uint8_t* body, size_t len, ReadyBody* out);
Status DecodeLogLevels(const uint8_t* body, size_t len, LogLevelsBody* out);
Status DecodeBlsRequest(const uint8_t* body, size_t len, BlsRequestBody* out);
Status DecodeBlsResponse(const uint8_t* body, size_t len, BlsResponseBody* out);
Status DecodeMetric(const uint8_t* body, size_t len, MetricBody* out);
Status DecodeMetricDone(const uint8_t* body, size_t len, MetricDoneBody* out);
// BLS_ARENA and BLS_RELEASE share the bodies of ARENA and RELEASE;
// BLS_CANCEL is empty; MODEL_CONTROL(_DONE) are JSON.

// Encoding: BeginFrame reserves the header, a body encoder appends the body,
// FinishFrame writes the header (body_len = bytes after the header).
void BeginFrame(std::vector<uint8_t>* out);
void FinishFrame(
    FrameType type, uint16_t flags, uint64_t id, std::vector<uint8_t>* out);

void EncodeJson(const std::string& json, std::vector<uint8_t>* out);
void EncodeArena(const ArenaBody& b, std::vector<uint8_t>* out);
void EncodeExecute(const ExecuteBody& b, std::vector<uint8_t>* out);
void EncodeResponses(const ResponsesBody& b, std::vector<uint8_t>* out);
void EncodeExecuteDone(const ExecuteDoneBody& b, std::vector<uint8_t>* out);
void EncodeLog(const LogBody& b, std::vector<uint8_t>* out);
void EncodeError(const ErrorBody& b, std::vector<uint8_t>* out);
void EncodeRelease(const ReleaseBody& b, std::vector<uint8_t>* out);
void EncodeCancel(const CancelBody& b, std::vector<uint8_t>* out);
void EncodeSendError(const SendErrorBody& b, std::vector<uint8_t>* out);
void EncodeReady(const ReadyBody& b, std::vector<uint8_t>* out);
void EncodeLogLevels(const LogLevelsBody& b, std::vector<uint8_t>* out);
void EncodeBlsRequest(const BlsRequestBody& b, std::vector<uint8_t>* out);
void EncodeBlsResponse(const BlsResponseBody& b, std::vector<uint8_t>* out);
void EncodeMetric(const MetricBody& b, std::vector<uint8_t>* out);
void EncodeMetricDone(const MetricDoneBody& b, std::vector<uint8_t>* out);

// A whole BODY_IN_ARENA frame (40 bytes): header with `flags` |
// kFlagBodyInArena and body_len, then the arena reference.
std::vector<uint8_t> EncodeBodyRefFrame(
    FrameType type, uint16_t flags, uint64_t id, uint32_t body_len,
    const ArenaRef& ref);

// Convenience: a complete frame whose body is produced by `encode_body`.
template <typename Fn>
std::vector<uint8_t>
MakeFrame(FrameType type, uint16_t flags, uint64_t id, Fn encode_body)
{
  std::vector<uint8_t> out;
  BeginFrame(&out);
  encode_body(&out);
  FinishFrame(type, flags, id, &out);
  return out;
}

// Size of a fixed-size element of `dtype` (BOOL 1 ... FP64 8, BF16 2);
// 0 for BYTES and unknown types.
uint32_t DataTypeByteSize(uint32_t dtype);
// The elements of a tensor of shape `dims` (each >= 0) in *count; false
// when that overflows 64 bits (0 whenever a dimension is 0).
bool ElementCount(const std::vector<int64_t>& dims, uint64_t* count);
// A shape for messages: "[2,3]".
std::string ShapeText(const std::vector<int64_t>& dims);

// Text (docs/protocol.md, "Text"; protocol_text.cc). Every `str` on the
// wire is UTF-8: request content (ids, names) may be any bytes, so the
// backend replaces each ill-formed sequence by U+FFFD, as Python's
// errors="replace" does.
bool IsValidUtf8(std::string_view s);
std::string ValidUtf8(std::string_view s);
// The backend's texts for the stub (error messages) are inline and at most
// kMaxBackendText bytes, the marker included:
// "<text>... [truncated, <N> bytes]", N the whole text's length.
// ValidUtf8(text) when it takes at most `limit` bytes, else its beginning,
// cut on a character boundary, and the marker: `limit` bytes in all (or
// the marker alone, if `limit` is shorter than it).
std::string ClipText(std::string_view text, size_t limit = kMaxBackendText);

}  // namespace proto
}  // namespace tritonpy
