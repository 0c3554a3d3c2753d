// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Checks the C++ codec against the golden frames of tests/golden/ (written
// by the reference codec tests/protocol_ref.py):
//  - every valid frame decodes to exactly the fields in frames.json, and
//    re-encodes to the same bytes (JSON-bodied frames: same JSON value);
//  - every prefix of a valid frame is rejected;
//  - every frame marked "invalid" is rejected;
//  - byte flips and body truncations never crash (run under
//    TRITONPY_SANITIZE for that to mean something).
//
// Usage: tritonpy_golden_test <golden-dir>. Prints "ok <file>" or
// "FAIL <file>: why" per frame and "N passed, M failed"; exit 0 iff all
// passed.

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "json.h"
#include "protocol.h"

namespace tp = tritonpy::proto;
using tritonpy::Status;
using tritonpy::json::Value;

namespace {

bool
ReadFile(const std::string& path, std::string* out)
{
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

std::string
Hex(const uint8_t* p, size_t n)
{
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

Value
TensorJson(const tp::Tensor& t)
{
  Value v = Value::Object();
  v.Set("name", Value::String(t.name));
  v.Set("dtype", Value::Int(t.dtype));
  Value dims = Value::Array();
  for (int64_t d : t.dims) dims.Append(Value::Int(d));
  v.Set("dims", std::move(dims));
  v.Set("byte_size", Value::Uint(t.byte_size));
  v.Set("location", Value::Int(t.location));
  if (t.location == tp::kLocationInline) {
    v.Set("data_hex", Value::String(Hex(t.data, t.byte_size)));
  } else {
    v.Set("arena_id", Value::Int(t.ref.arena_id));
    v.Set("offset", Value::Uint(t.ref.offset));
  }
  return v;
}

Value
RequestJson(const tp::Request& q)
{
  Value r = Value::Object();
  r.Set("request_id", Value::String(q.request_id));
  r.Set("correlation_kind", Value::Int(q.correlation_kind));
  r.Set("correlation_u64", Value::Uint(q.correlation_u64));
  r.Set("correlation_str", Value::String(q.correlation_str));
  r.Set("flags", Value::Int(q.flags));
  r.Set("timeout_us", Value::Uint(q.timeout_us));
  r.Set("parameters", Value::String(q.parameters));
  Value outs = Value::Array();
  for (const std::string& s : q.requested_outputs) {
    outs.Append(Value::String(s));
  }
  r.Set("requested_outputs", std::move(outs));
  Value ins = Value::Array();
  for (const tp::Tensor& t : q.inputs) ins.Append(TensorJson(t));
  r.Set("inputs", std::move(ins));
  r.Set("trace_context", Value::String(q.trace_context));
  return r;
}

Value
Doubles(const std::vector<double>& v)
{
  Value a = Value::Array();
  for (double d : v) a.Append(Value::Double(d));
  return a;
}

Value
MetricOpJson(const tp::MetricOp& op)
{
  Value v = Value::Object();
  v.Set("op", Value::Int(static_cast<int>(op.op)));
  switch (op.op) {
    case tp::MetricOpCode::kFamilyNew:
      v.Set("family", Value::Int(op.family));
      v.Set("kind", Value::Int(op.kind));
      v.Set("name", Value::String(op.name));
      v.Set("description", Value::String(op.description));
      break;
    case tp::MetricOpCode::kFamilyDelete:
      v.Set("family", Value::Int(op.family));
      break;
    case tp::MetricOpCode::kMetricNew: {
      v.Set("metric", Value::Int(op.metric));
      v.Set("family", Value::Int(op.family));
      Value labels = Value::Array();
      for (const auto& l : op.labels) {
        Value pair = Value::Array();
        pair.Append(Value::String(l.first));
        pair.Append(Value::String(l.second));
        labels.Append(std::move(pair));
      }
      v.Set("labels", std::move(labels));
      v.Set("buckets", Doubles(op.values));
      break;
    }
    case tp::MetricOpCode::kMetricDelete:
    case tp::MetricOpCode::kValue:
      v.Set("metric", Value::Int(op.metric));
      break;
    case tp::MetricOpCode::kIncrement:
    case tp::MetricOpCode::kSet:
      v.Set("metric", Value::Int(op.metric));
      v.Set("value", Value::Double(op.value));
      break;
    case tp::MetricOpCode::kObserve:
      v.Set("metric", Value::Int(op.metric));
      v.Set("values", Doubles(op.values));
      break;
  }
  return v;
}

// Decodes a whole frame the way the backend does, into the JSON shape of
// protocol_ref.decode()["body"], and re-encodes it into *reencoded.
Status
DecodeFrame(
    const std::string& bytes, tp::FrameView* f, Value* body,
    std::vector<uint8_t>* reencoded)
{
  const uint8_t* msg = reinterpret_cast<const uint8_t*>(bytes.data());
  TRITONPY_RETURN_IF_ERROR(tp::DecodeHeader(msg, bytes.size(), f));
  *body = Value::Object();
  if (f->body_in_arena) {
    body->Set("arena_id", Value::Int(f->body_ref.arena_id));
    body->Set("offset", Value::Uint(f->body_ref.offset));
    body->Set("body_len", Value::Int(f->body_len));
    *reencoded = tp::EncodeBodyRefFrame(
        f->type, f->flags & ~tp::kFlagBodyInArena, f->id, f->body_len,
        f->body_ref);
    return Status();
  }
  const uint8_t* b = f->body;
  size_t n = f->body_len;
  std::vector<uint8_t>* out = reencoded;
  tp::BeginFrame(out);
  switch (f->type) {
    case tp::FrameType::kHello:
    case tp::FrameType::kInit:
    case tp::FrameType::kInitDone:
    case tp::FrameType::kFinalizeDone:
    case tp::FrameType::kModelControl:
    case tp::FrameType::kModelControlDone:
    case tp::FrameType::kAutoComplete:
    case tp::FrameType::kAutoCompleteDone: {
      std::string text;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeJson(b, n, &text));
      Value doc;
      TRITONPY_RETURN_IF_ERROR(tritonpy::json::Parse(text, &doc));
      if (!doc.is_object()) return Status::InvalidArg("JSON body not object");
      body->Set("json", doc);
      tp::EncodeJson(doc.Serialize(), out);
      break;
    }
    case tp::FrameType::kFinalize:
    case tp::FrameType::kIsReady:
    case tp::FrameType::kDrain:
    case tp::FrameType::kBlsCancel:
      TRITONPY_RETURN_IF_ERROR(tp::DecodeEmpty(b, n));
      break;
    case tp::FrameType::kBlsRequest: {
      tp::BlsRequestBody q;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeBlsRequest(b, n, &q));
      body->Set("model_name", Value::String(q.model_name));
      body->Set("model_version", Value::Int(q.model_version));
      body->Set("trace_batch_id", Value::Uint(q.trace_batch_id));
      body->Set("trace_request_index", Value::Int(q.trace_request_index));
      body->Set("request", RequestJson(q.request));
      tp::EncodeBlsRequest(q, out);
      break;
    }
    case tp::FrameType::kBlsResponse: {
      tp::BlsResponseBody p;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeBlsResponse(b, n, &p));
      body->Set("response_flags", Value::Int(p.response_flags));
      body->Set("has_error", Value::Int(p.has_error));
      body->Set("error_code", Value::Int(p.error_code));
      body->Set("error_message", Value::String(p.error_message));
      body->Set("parameters", Value::String(p.parameters));
      Value outs = Value::Array();
      for (const tp::Tensor& t : p.outputs) outs.Append(TensorJson(t));
      body->Set("outputs", std::move(outs));
      tp::EncodeBlsResponse(p, out);
      break;
    }
    case tp::FrameType::kMetric: {
      tp::MetricBody m;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeMetric(b, n, &m));
      Value ops = Value::Array();
      for (const tp::MetricOp& op : m.ops) ops.Append(MetricOpJson(op));
      body->Set("ops", std::move(ops));
      tp::EncodeMetric(m, out);
      break;
    }
    case tp::FrameType::kMetricDone: {
      tp::MetricDoneBody d;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeMetricDone(b, n, &d));
      body->Set("ok", Value::Int(d.ok));
      body->Set("error", Value::String(d.error));
      body->Set("value", Value::Double(d.value));
      tp::EncodeMetricDone(d, out);
      break;
    }
    case tp::FrameType::kCancel: {
      tp::CancelBody c;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeCancel(b, n, &c));
      Value reqs = Value::Array();
      for (const tp::RequestRef& q : c.requests) {
        Value v = Value::Object();
        v.Set("batch_id", Value::Uint(q.batch_id));
        v.Set("request_index", Value::Int(q.request_index));
        reqs.Append(std::move(v));
      }
      body->Set("requests", std::move(reqs));
      tp::EncodeCancel(c, out);
      break;
    }
    case tp::FrameType::kSendError: {
      tp::SendErrorBody e;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeSendError(b, n, &e));
      body->Set("batch_id", Value::Uint(e.batch_id));
      body->Set("request_index", Value::Int(e.request_index));
      body->Set("error_code", Value::Int(e.error_code));
      body->Set("message", Value::String(e.message));
      tp::EncodeSendError(e, out);
      break;
    }
    case tp::FrameType::kReady: {
      tp::ReadyBody r;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeReady(b, n, &r));
      body->Set("ready", Value::Int(r.ready));
      body->Set("message", Value::String(r.message));
      tp::EncodeReady(r, out);
      break;
    }
    case tp::FrameType::kLogLevels: {
      tp::LogLevelsBody l;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeLogLevels(b, n, &l));
      body->Set("enabled", Value::Int(l.enabled));
      tp::EncodeLogLevels(l, out);
      break;
    }
    case tp::FrameType::kArena:
    case tp::FrameType::kBlsArena: {
      tp::ArenaBody a;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeArena(b, n, &a));
      body->Set("arena_id", Value::Int(a.arena_id));
      body->Set("size", Value::Uint(a.size));
      tp::EncodeArena(a, out);
      break;
    }
    case tp::FrameType::kExecute: {
      tp::ExecuteBody e;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeExecute(b, n, &e));
      Value reqs = Value::Array();
      for (const tp::Request& q : e.requests) reqs.Append(RequestJson(q));
      body->Set("requests", std::move(reqs));
      tp::EncodeExecute(e, out);
      break;
    }
    case tp::FrameType::kResponses: {
      tp::ResponsesBody rb;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeResponses(b, n, &rb));
      Value resps = Value::Array();
      for (const tp::Response& p : rb.responses) {
        Value r = Value::Object();
        r.Set("batch_id", Value::Uint(p.batch_id));
        r.Set("request_index", Value::Int(p.request_index));
        r.Set("response_flags", Value::Int(p.response_flags));
        r.Set("has_error", Value::Int(p.has_error));
        r.Set("error_code", Value::Int(p.error_code));
        r.Set("error_message", Value::String(p.error_message));
        r.Set("parameters", Value::String(p.parameters));
        Value outs = Value::Array();
        for (const tp::Tensor& t : p.outputs) outs.Append(TensorJson(t));
        r.Set("outputs", std::move(outs));
        resps.Append(std::move(r));
      }
      body->Set("responses", std::move(resps));
      tp::EncodeResponses(rb, out);
      break;
    }
    case tp::FrameType::kExecuteDone: {
      tp::ExecuteDoneBody d;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeExecuteDone(b, n, &d));
      body->Set("ok", Value::Int(d.ok));
      body->Set("error", Value::String(d.error));
      tp::EncodeExecuteDone(d, out);
      break;
    }
    case tp::FrameType::kLog: {
      tp::LogBody l;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeLog(b, n, &l));
      body->Set("level", Value::Int(l.level));
      body->Set("file", Value::String(l.file));
      body->Set("line", Value::Int(l.line));
      body->Set("message", Value::String(l.message));
      tp::EncodeLog(l, out);
      break;
    }
    case tp::FrameType::kError: {
      tp::ErrorBody e;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeError(b, n, &e));
      body->Set("message", Value::String(e.message));
      tp::EncodeError(e, out);
      break;
    }
    case tp::FrameType::kRelease:
    case tp::FrameType::kBlsRelease: {
      tp::ReleaseBody r;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeRelease(b, n, &r));
      Value allocs = Value::Array();
      for (const tp::ArenaRef& a : r.allocations) {
        Value v = Value::Object();
        v.Set("arena_id", Value::Int(a.arena_id));
        v.Set("offset", Value::Uint(a.offset));
        allocs.Append(std::move(v));
      }
      body->Set("allocations", std::move(allocs));
      tp::EncodeRelease(r, out);
      break;
    }
  }
  tp::FinishFrame(f->type, f->flags, f->id, out);
  return Status();
}

// Robustness only: these may succeed or fail, they must not crash.
void
Abuse(const std::string& bytes)
{
  tp::FrameView f;
  Value body;
  std::vector<uint8_t> re;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0xFF);
    (void)DecodeFrame(flipped, &f, &body, &re);
    flipped[i] = static_cast<char>(bytes[i] ^ 0x01);
    (void)DecodeFrame(flipped, &f, &body, &re);
  }
  // Body prefixes with a consistent header.
  if (bytes.size() >= tp::kHeaderSize) {
    for (size_t n = tp::kHeaderSize; n < bytes.size(); ++n) {
      std::string cut = bytes.substr(0, n);
      uint32_t len = static_cast<uint32_t>(n - tp::kHeaderSize);
      for (int k = 0; k < 4; ++k) {
        cut[16 + k] = static_cast<char>((len >> (8 * k)) & 0xFF);
      }
      (void)DecodeFrame(cut, &f, &body, &re);
    }
  }
}

std::string
CheckValid(const Value& entry, const std::string& bytes)
{
  tp::FrameView f;
  Value body;
  std::vector<uint8_t> re;
  Status s = DecodeFrame(bytes, &f, &body, &re);
  if (!s.ok()) return "decode failed: " + s.message();
  if (tp::FrameTypeName(f.type) != entry.GetString("type")) {
    return std::string("type ") + tp::FrameTypeName(f.type) + ", expected " +
           entry.GetString("type");
  }
  const Value* id = entry.Find("id");
  if (id == nullptr || Value::Uint(f.id) != *id) {
    return "id " + std::to_string(f.id) + " differs";
  }
  if (static_cast<int64_t>(f.flags) != entry.GetInt("flags", -1)) {
    return "flags " + std::to_string(f.flags) + " differ";
  }
  const Value* want = entry.Find("body");
  if (want == nullptr || body != *want) {
    return "body differs: got " + body.Serialize() + " expected " +
           (want ? want->Serialize() : std::string("nothing"));
  }
  bool json_body = tp::IsJsonFrame(f.type) && !f.body_in_arena;
  if (!json_body) {
    std::string again(re.begin(), re.end());
    if (again != bytes) return "re-encoded bytes differ";
  } else {
    // Key order and spacing may differ: compare the decoded JSON again.
    tp::FrameView f2;
    Value body2;
    std::vector<uint8_t> re2;
    std::string again(re.begin(), re.end());
    Status s2 = DecodeFrame(again, &f2, &body2, &re2);
    if (!s2.ok() || body2 != body || f2.id != f.id || f2.type != f.type) {
      return "re-encoded JSON frame differs";
    }
  }
  for (size_t n = 0; n < bytes.size(); ++n) {
    tp::FrameView fp;
    Value bp;
    std::vector<uint8_t> rp;
    if (DecodeFrame(bytes.substr(0, n), &fp, &bp, &rp).ok()) {
      return "prefix of " + std::to_string(n) + " bytes was accepted";
    }
  }
  Abuse(bytes);
  return "";
}

}  // namespace

int
main(int argc, char** argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: %s <golden-dir>\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  std::string text;
  if (!ReadFile(dir + "/frames.json", &text)) {
    fprintf(stderr, "cannot read %s/frames.json\n", dir.c_str());
    return 2;
  }
  Value entries;
  Status s = tritonpy::json::Parse(text, &entries);
  if (!s.ok() || !entries.is_array()) {
    fprintf(stderr, "frames.json: %s\n", s.message().c_str());
    return 2;
  }
  int passed = 0, failed = 0;
  for (const Value& entry : entries.items()) {
    std::string file = entry.GetString("file");
    std::string bytes;
    std::string why;
    if (!ReadFile(dir + "/" + file, &bytes)) {
      why = "cannot read the file";
    } else if (entry.GetBool("invalid", false)) {
      tp::FrameView f;
      Value body;
      std::vector<uint8_t> re;
      if (DecodeFrame(bytes, &f, &body, &re).ok()) {
        why = "accepted an invalid frame (" + entry.GetString("why") + ")";
      }
      Abuse(bytes);
    } else {
      why = CheckValid(entry, bytes);
    }
    if (why.empty()) {
      ++passed;
      printf("ok %s\n", file.c_str());
    } else {
      ++failed;
      printf("FAIL %s: %s\n", file.c_str(), why.c_str());
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
