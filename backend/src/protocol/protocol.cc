// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "protocol/protocol.h"

#include <cstring>

#include "protocol/protocol_codec.h"
#include "util/json.h"

namespace tritonpy {
namespace proto {

using codec::GetU32;
using codec::GetU64;
using codec::PutU32;
using codec::PutU64;
using codec::Reader;
using codec::Violation;
using codec::Writer;

namespace {

// One request entry (EXECUTE and BLS_REQUEST share it).
Status
ReadRequest(Reader* r, Request* q)
{
  TRITONPY_RETURN_IF_ERROR(r->Str(&q->request_id));
  TRITONPY_RETURN_IF_ERROR(r->U8(&q->correlation_kind));
  if (q->correlation_kind > 2) return Violation("bad correlation kind");
  TRITONPY_RETURN_IF_ERROR(r->U64(&q->correlation_u64));
  TRITONPY_RETURN_IF_ERROR(r->Str(&q->correlation_str));
  TRITONPY_RETURN_IF_ERROR(r->U32(&q->flags));
  TRITONPY_RETURN_IF_ERROR(r->U64(&q->timeout_us));
  TRITONPY_RETURN_IF_ERROR(r->Str(&q->parameters));
  uint32_t nout;
  TRITONPY_RETURN_IF_ERROR(r->Count(kLengthSize, &nout));
  q->requested_outputs.assign(nout, std::string());
  for (std::string& name : q->requested_outputs) {
    TRITONPY_RETURN_IF_ERROR(r->Str(&name));
  }
  uint32_t nin;
  TRITONPY_RETURN_IF_ERROR(r->Count(kTensorMinSize, &nin));
  q->inputs.assign(nin, Tensor());
  for (Tensor& t : q->inputs) TRITONPY_RETURN_IF_ERROR(r->Tensor(&t));
  return r->Str(&q->trace_context);
}

void
WriteRequest(Writer* w, const Request& q)
{
  w->Str(q.request_id);
  w->U8(q.correlation_kind);
  w->U64(q.correlation_u64);
  w->Str(q.correlation_str);
  w->U32(q.flags);
  w->U64(q.timeout_us);
  w->Str(q.parameters);
  w->U32(static_cast<uint32_t>(q.requested_outputs.size()));
  for (const std::string& name : q.requested_outputs) w->Str(name);
  w->U32(static_cast<uint32_t>(q.inputs.size()));
  for (const Tensor& t : q.inputs) w->Tensor(t);
  w->Str(q.trace_context);
}

}  // namespace

const char*
FrameTypeName(FrameType t)
{
  const auto type = static_cast<uint8_t>(t);
  return type <= kMaxFrameType ? kFrameTypeNames[type] : kFrameTypeNames[0];
}

bool
IsJsonFrame(FrameType t)
{
  const auto type = static_cast<uint8_t>(t);
  return type < 32 && ((kJsonFrameTypes >> type) & 1) != 0;
}

uint32_t
DataTypeByteSize(uint32_t dtype)
{
  switch (dtype) {
    case 1:  // BOOL
    case 2:  // UINT8
    case 6:  // INT8
      return 1;
    case 3:   // UINT16
    case 7:   // INT16
    case 10:  // FP16
    case 14:  // BF16
      return 2;
    case 4:   // UINT32
    case 8:   // INT32
    case 11:  // FP32
      return 4;
    case 5:   // UINT64
    case 9:   // INT64
    case 12:  // FP64
      return 8;
    default:  // BYTES (13) and unknown
      return 0;
  }
}

bool
ElementCount(const std::vector<int64_t>& dims, uint64_t* count)
{
  *count = 1;
  bool fits = true;
  for (int64_t d : dims) {
    if (d == 0) {
      *count = 0;
      return true;
    }
    fits = fits &&
           !__builtin_mul_overflow(*count, static_cast<uint64_t>(d), count);
  }
  return fits;
}

std::string
ShapeText(const std::vector<int64_t>& dims)
{
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

Status
DecodeHeader(const uint8_t* msg, size_t len, FrameView* out)
{
  if (len < kHeaderSize) {
    return Violation(
        "message of " + std::to_string(len) + " bytes is shorter than the " +
        "header");
  }
  if (len > kMaxFrame) return Violation("message longer than MAX_FRAME");
  if (GetU32(msg + kHeaderMagicOffset) != kMagic) {
    return Violation("bad magic");
  }
  const uint8_t version = msg[kHeaderVersionOffset];
  if (version != kVersion) {
    return Violation("unsupported version " + std::to_string(version));
  }
  uint8_t type = msg[kHeaderTypeOffset];
  if (type < 1 || type > kMaxFrameType) {
    return Violation("unknown frame type " + std::to_string(type));
  }
  const uint8_t* flags_at = msg + kHeaderFlagsOffset;
  uint16_t flags = static_cast<uint16_t>(flags_at[0] | (flags_at[1] << 8));
  uint16_t allowed =
      kFlagBodyInArena |
      (type == static_cast<uint8_t>(FrameType::kResponses) ? kFlagBatchDone
                                                           : 0);
  if ((flags & ~allowed) != 0) {
    return Violation("unknown flags " + std::to_string(flags));
  }
  if (GetU32(msg + kHeaderReservedOffset) != 0) {
    return Violation("reserved header field not 0");
  }
  out->type = static_cast<FrameType>(type);
  out->flags = flags;
  out->id = GetU64(msg + kHeaderIdOffset);
  out->body_len = GetU32(msg + kHeaderBodyLenOffset);
  out->body_in_arena = (flags & kFlagBodyInArena) != 0;
  if (out->body_in_arena) {
    if (len != kHeaderSize + kArenaRefSize) {
      return Violation("BODY_IN_ARENA frame must carry only a reference");
    }
    Reader r(msg + kHeaderSize, kArenaRefSize);
    TRITONPY_RETURN_IF_ERROR(r.Ref(&out->body_ref));
    out->body = nullptr;
  } else {
    if (out->body_len != len - kHeaderSize) {
      return Violation("body_len does not match the message length");
    }
    out->body = msg + kHeaderSize;
  }
  return Status();
}

Status
DecodeJson(const uint8_t* body, size_t len, std::string* out)
{
  out->assign(reinterpret_cast<const char*>(body), len);
  return Status();
}

Status
CheckHello(const std::string& json_text)
{
  json::Value hello;
  TRITONPY_RETURN_IF_ERROR(json::Parse(json_text, &hello));
  const json::Value* version = json::Find(hello, "protocol");
  if (version == nullptr || !version->is_number_integer() ||
      version->get<int64_t>() != kVersion) {
    return Status::Unsupported(
        "the stub speaks protocol " +
        (version != nullptr ? json::Write(*version) : std::string("?")) +
        ", this backend speaks protocol " + std::to_string(kVersion));
  }
  return Status();
}

Status
DecodeEmpty(const uint8_t* body, size_t len)
{
  Reader r(body, len);
  return r.Done();
}

Status
DecodeCancel(const uint8_t* body, size_t len, CancelBody* out)
{
  Reader r(body, len);
  uint32_t n;
  TRITONPY_RETURN_IF_ERROR(r.Count(kCancelEntrySize, &n));
  out->requests.assign(n, RequestRef());
  for (RequestRef& q : out->requests) {
    TRITONPY_RETURN_IF_ERROR(r.U64(&q.batch_id));
    TRITONPY_RETURN_IF_ERROR(r.U32(&q.request_index));
    TRITONPY_RETURN_IF_ERROR(r.Zero32());
  }
  return r.Done();
}

Status
DecodeSendError(const uint8_t* body, size_t len, SendErrorBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.U64(&out->batch_id));
  TRITONPY_RETURN_IF_ERROR(r.U32(&out->request_index));
  TRITONPY_RETURN_IF_ERROR(r.U32(&out->error_code));
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->message));
  return r.Done();
}

Status
DecodeReady(const uint8_t* body, size_t len, ReadyBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.U8(&out->ready));
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->message));
  return r.Done();
}

Status
DecodeLogLevels(const uint8_t* body, size_t len, LogLevelsBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.U32(&out->enabled));
  if ((out->enabled & ~kLogLevelsAll) != 0) {
    return Violation("LOG_LEVELS: unknown log level bits");
  }
  return r.Done();
}

Status
DecodeArena(const uint8_t* body, size_t len, ArenaBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.U32(&out->arena_id));
  TRITONPY_RETURN_IF_ERROR(r.Zero32());
  TRITONPY_RETURN_IF_ERROR(r.U64(&out->size));
  return r.Done();
}

Status
DecodeExecute(const uint8_t* body, size_t len, ExecuteBody* out)
{
  Reader r(body, len);
  uint32_t n;
  TRITONPY_RETURN_IF_ERROR(r.Count(kRequestMinSize, &n));
  out->requests.assign(n, Request());
  for (Request& q : out->requests) {
    TRITONPY_RETURN_IF_ERROR(ReadRequest(&r, &q));
  }
  return r.Done();
}

Status
DecodeBlsRequest(const uint8_t* body, size_t len, BlsRequestBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->model_name));
  TRITONPY_RETURN_IF_ERROR(r.I64(&out->model_version));
  TRITONPY_RETURN_IF_ERROR(r.U64(&out->trace_batch_id));
  TRITONPY_RETURN_IF_ERROR(r.U32(&out->trace_request_index));
  TRITONPY_RETURN_IF_ERROR(ReadRequest(&r, &out->request));
  return r.Done();
}

Status
DecodeBlsResponse(const uint8_t* body, size_t len, BlsResponseBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.U32(&out->response_flags));
  if ((out->response_flags & ~kRespFinal) != 0) {
    return Violation(
        "unknown BLS response flags " + std::to_string(out->response_flags));
  }
  TRITONPY_RETURN_IF_ERROR(r.U8(&out->has_error));
  TRITONPY_RETURN_IF_ERROR(r.U32(&out->error_code));
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->error_message));
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->parameters));
  uint32_t nout;
  TRITONPY_RETURN_IF_ERROR(r.Count(kTensorMinSize, &nout));
  out->outputs.assign(nout, Tensor());
  for (Tensor& t : out->outputs) TRITONPY_RETURN_IF_ERROR(r.Tensor(&t));
  return r.Done();
}

Status
DecodeResponses(const uint8_t* body, size_t len, ResponsesBody* out)
{
  Reader r(body, len);
  uint32_t n;
  TRITONPY_RETURN_IF_ERROR(r.Count(kResponseEntryMinSize, &n));
  // Every field of every entry is written below, so a body reused from
  // frame to frame (BatchTable's) keeps its allocations.
  out->responses.resize(n);
  for (Response& p : out->responses) {
    TRITONPY_RETURN_IF_ERROR(r.U64(&p.batch_id));
    TRITONPY_RETURN_IF_ERROR(r.U32(&p.request_index));
    TRITONPY_RETURN_IF_ERROR(r.U32(&p.response_flags));
    if ((p.response_flags & ~kRespKnownFlags) != 0) {
      return Violation(
          "unknown response flags " + std::to_string(p.response_flags));
    }
    TRITONPY_RETURN_IF_ERROR(r.U8(&p.has_error));
    TRITONPY_RETURN_IF_ERROR(r.U32(&p.error_code));
    TRITONPY_RETURN_IF_ERROR(r.Str(&p.error_message));
    TRITONPY_RETURN_IF_ERROR(r.Str(&p.parameters));
    uint32_t nout;
    TRITONPY_RETURN_IF_ERROR(r.Count(kTensorMinSize, &nout));
    p.outputs.resize(nout);
    for (Tensor& t : p.outputs) {
      TRITONPY_RETURN_IF_ERROR(r.Tensor(&t, /*receiver_arena_ok=*/true));
    }
  }
  return r.Done();
}

Status
DecodeExecuteDone(const uint8_t* body, size_t len, ExecuteDoneBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.U8(&out->ok));
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->error));
  return r.Done();
}

Status
DecodeLog(const uint8_t* body, size_t len, LogBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.U32(&out->level));
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->file));
  TRITONPY_RETURN_IF_ERROR(r.U32(&out->line));
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->message));
  return r.Done();
}

Status
DecodeError(const uint8_t* body, size_t len, ErrorBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->message));
  return r.Done();
}

Status
DecodeRelease(const uint8_t* body, size_t len, ReleaseBody* out)
{
  Reader r(body, len);
  uint32_t n;
  TRITONPY_RETURN_IF_ERROR(r.Count(kAllocationSize, &n));
  out->allocations.assign(n, ArenaRef());
  for (ArenaRef& a : out->allocations) TRITONPY_RETURN_IF_ERROR(r.Ref(&a));
  return r.Done();
}

void
BeginFrame(std::vector<uint8_t>* out)
{
  out->assign(kHeaderSize, 0);
}

void
FinishFrame(
    FrameType type, uint16_t flags, uint64_t id, std::vector<uint8_t>* out)
{
  uint8_t* h = out->data();
  PutU32(h + kHeaderMagicOffset, kMagic);
  h[kHeaderVersionOffset] = kVersion;
  h[kHeaderTypeOffset] = static_cast<uint8_t>(type);
  h[kHeaderFlagsOffset] = static_cast<uint8_t>(flags & 0xFF);
  h[kHeaderFlagsOffset + 1] = static_cast<uint8_t>(flags >> 8);
  PutU64(h + kHeaderIdOffset, id);
  PutU32(
      h + kHeaderBodyLenOffset,
      static_cast<uint32_t>(out->size() - kHeaderSize));
  PutU32(h + kHeaderReservedOffset, 0);
}

std::vector<uint8_t>
EncodeBodyRefFrame(
    FrameType type, uint16_t flags, uint64_t id, uint32_t body_len,
    const ArenaRef& ref)
{
  std::vector<uint8_t> out;
  BeginFrame(&out);
  Writer w(&out);
  w.Ref(ref);
  FinishFrame(type, flags | kFlagBodyInArena, id, &out);
  PutU32(out.data() + kHeaderBodyLenOffset, body_len);
  return out;
}

void
EncodeJson(const std::string& json, std::vector<uint8_t>* out)
{
  Writer(out).Bytes(json.data(), json.size());
}

void
EncodeArena(const ArenaBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U32(b.arena_id);
  w.U32(0);
  w.U64(b.size);
}

void
EncodeExecute(const ExecuteBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U32(static_cast<uint32_t>(b.requests.size()));
  for (const Request& q : b.requests) WriteRequest(&w, q);
}

void
EncodeBlsRequest(const BlsRequestBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.Str(b.model_name);
  w.I64(b.model_version);
  w.U64(b.trace_batch_id);
  w.U32(b.trace_request_index);
  WriteRequest(&w, b.request);
}

void
EncodeBlsResponse(const BlsResponseBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U32(b.response_flags);
  w.U8(b.has_error);
  w.U32(b.error_code);
  w.Text(b.error_message);
  w.Str(b.parameters);
  w.U32(static_cast<uint32_t>(b.outputs.size()));
  for (const Tensor& t : b.outputs) w.Tensor(t);
}

void
EncodeResponses(const ResponsesBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U32(static_cast<uint32_t>(b.responses.size()));
  for (const Response& p : b.responses) {
    w.U64(p.batch_id);
    w.U32(p.request_index);
    w.U32(p.response_flags);
    w.U8(p.has_error);
    w.U32(p.error_code);
    w.Str(p.error_message);
    w.Str(p.parameters);
    w.U32(static_cast<uint32_t>(p.outputs.size()));
    for (const Tensor& t : p.outputs) w.Tensor(t);
  }
}

void
EncodeExecuteDone(const ExecuteDoneBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U8(b.ok);
  w.Str(b.error);
}

void
EncodeLog(const LogBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U32(b.level);
  w.Str(b.file);
  w.U32(b.line);
  w.Str(b.message);
}

void
EncodeError(const ErrorBody& b, std::vector<uint8_t>* out)
{
  Writer(out).Text(b.message);
}

void
EncodeRelease(const ReleaseBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U32(static_cast<uint32_t>(b.allocations.size()));
  for (const ArenaRef& a : b.allocations) w.Ref(a);
}

void
EncodeCancel(const CancelBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U32(static_cast<uint32_t>(b.requests.size()));
  for (const RequestRef& q : b.requests) {
    w.U64(q.batch_id);
    w.U32(q.request_index);
    w.U32(0);
  }
}

void
EncodeSendError(const SendErrorBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U64(b.batch_id);
  w.U32(b.request_index);
  w.U32(b.error_code);
  w.Text(b.message);
}

void
EncodeReady(const ReadyBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U8(b.ready);
  w.Str(b.message);
}

void
EncodeLogLevels(const LogLevelsBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U32(b.enabled);
}

}  // namespace proto
}  // namespace tritonpy
