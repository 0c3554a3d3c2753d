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

#include "protocol/protocol.h"
#include "util/json.h"

namespace tp = tritonpy::proto;
using tritonpy::Status;
using tritonpy::json::Value;

namespace {

// Equal as JSON: key order aside, integers and doubles by value.
bool
Same(const Value& a, const Value& b)
{
  return nlohmann::json(a) == nlohmann::json(b);
}

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
  Value v = Value::object();
  v["name"] = t.name;
  v["dtype"] = t.dtype;
  Value dims = Value::array();
  for (int64_t d : t.dims) dims.push_back(d);
  v["dims"] = std::move(dims);
  v["byte_size"] = t.byte_size;
  v["location"] = t.location;
  if (t.location == tp::kLocationInline) {
    v["data_hex"] = Hex(t.data, t.byte_size);
  } else {
    v["arena_id"] = t.ref.arena_id;
    v["offset"] = t.ref.offset;
  }
  return v;
}

Value
RequestJson(const tp::Request& q)
{
  Value r = Value::object();
  r["request_id"] = q.request_id;
  r["correlation_kind"] = q.correlation_kind;
  r["correlation_u64"] = q.correlation_u64;
  r["correlation_str"] = q.correlation_str;
  r["flags"] = q.flags;
  r["timeout_us"] = q.timeout_us;
  r["parameters"] = q.parameters;
  Value outs = Value::array();
  for (const std::string& s : q.requested_outputs) {
    outs.push_back(s);
  }
  r["requested_outputs"] = std::move(outs);
  Value ins = Value::array();
  for (const tp::Tensor& t : q.inputs) ins.push_back(TensorJson(t));
  r["inputs"] = std::move(ins);
  r["trace_context"] = q.trace_context;
  return r;
}

Value
Doubles(const std::vector<double>& v)
{
  Value a = Value::array();
  for (double d : v) a.push_back(d);
  return a;
}

Value
MetricOpJson(const tp::MetricOp& op)
{
  Value v = Value::object();
  v["op"] = static_cast<int>(op.op);
  switch (op.op) {
    case tp::MetricOpCode::kFamilyNew:
      v["family"] = op.family;
      v["kind"] = op.kind;
      v["name"] = op.name;
      v["description"] = op.description;
      break;
    case tp::MetricOpCode::kFamilyDelete:
      v["family"] = op.family;
      break;
    case tp::MetricOpCode::kMetricNew: {
      v["metric"] = op.metric;
      v["family"] = op.family;
      Value labels = Value::array();
      for (const auto& l : op.labels) {
        Value pair = Value::array();
        pair.push_back(l.first);
        pair.push_back(l.second);
        labels.push_back(std::move(pair));
      }
      v["labels"] = std::move(labels);
      v["buckets"] = Doubles(op.values);
      break;
    }
    case tp::MetricOpCode::kMetricDelete:
    case tp::MetricOpCode::kValue:
      v["metric"] = op.metric;
      break;
    case tp::MetricOpCode::kIncrement:
    case tp::MetricOpCode::kSet:
      v["metric"] = op.metric;
      v["value"] = op.value;
      break;
    case tp::MetricOpCode::kObserve:
      v["metric"] = op.metric;
      v["values"] = Doubles(op.values);
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
  *body = Value::object();
  if (f->body_in_arena) {
    (*body)["arena_id"] = f->body_ref.arena_id;
    (*body)["offset"] = f->body_ref.offset;
    (*body)["body_len"] = f->body_len;
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
      (*body)["json"] = doc;
      tp::EncodeJson(tritonpy::json::Write(doc), out);
      break;
    }
    case tp::FrameType::kFinalize:
    case tp::FrameType::kIsReady:
    case tp::FrameType::kDrain:
    case tp::FrameType::kBlsCancel:
    case tp::FrameType::kBlsChannel:
      TRITONPY_RETURN_IF_ERROR(tp::DecodeEmpty(b, n));
      break;
    case tp::FrameType::kBlsRequest: {
      tp::BlsRequestBody q;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeBlsRequest(b, n, &q));
      (*body)["model_name"] = q.model_name;
      (*body)["model_version"] = q.model_version;
      (*body)["trace_batch_id"] = q.trace_batch_id;
      (*body)["trace_request_index"] = q.trace_request_index;
      (*body)["request"] = RequestJson(q.request);
      tp::EncodeBlsRequest(q, out);
      break;
    }
    case tp::FrameType::kBlsResponse: {
      tp::BlsResponseBody p;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeBlsResponse(b, n, &p));
      (*body)["response_flags"] = p.response_flags;
      (*body)["has_error"] = p.has_error;
      (*body)["error_code"] = p.error_code;
      (*body)["error_message"] = p.error_message;
      (*body)["parameters"] = p.parameters;
      Value outs = Value::array();
      for (const tp::Tensor& t : p.outputs) outs.push_back(TensorJson(t));
      (*body)["outputs"] = std::move(outs);
      tp::EncodeBlsResponse(p, out);
      break;
    }
    case tp::FrameType::kMetric: {
      tp::MetricBody m;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeMetric(b, n, &m));
      Value ops = Value::array();
      for (const tp::MetricOp& op : m.ops) ops.push_back(MetricOpJson(op));
      (*body)["ops"] = std::move(ops);
      tp::EncodeMetric(m, out);
      break;
    }
    case tp::FrameType::kMetricDone: {
      tp::MetricDoneBody d;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeMetricDone(b, n, &d));
      (*body)["ok"] = d.ok;
      (*body)["error"] = d.error;
      (*body)["value"] = d.value;
      tp::EncodeMetricDone(d, out);
      break;
    }
    case tp::FrameType::kCancel: {
      tp::CancelBody c;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeCancel(b, n, &c));
      Value reqs = Value::array();
      for (const tp::RequestRef& q : c.requests) {
        Value v = Value::object();
        v["batch_id"] = q.batch_id;
        v["request_index"] = q.request_index;
        reqs.push_back(std::move(v));
      }
      (*body)["requests"] = std::move(reqs);
      tp::EncodeCancel(c, out);
      break;
    }
    case tp::FrameType::kSendError: {
      tp::SendErrorBody e;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeSendError(b, n, &e));
      (*body)["batch_id"] = e.batch_id;
      (*body)["request_index"] = e.request_index;
      (*body)["error_code"] = e.error_code;
      (*body)["message"] = e.message;
      tp::EncodeSendError(e, out);
      break;
    }
    case tp::FrameType::kReady: {
      tp::ReadyBody r;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeReady(b, n, &r));
      (*body)["ready"] = r.ready;
      (*body)["message"] = r.message;
      tp::EncodeReady(r, out);
      break;
    }
    case tp::FrameType::kLogLevels: {
      tp::LogLevelsBody l;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeLogLevels(b, n, &l));
      (*body)["enabled"] = l.enabled;
      tp::EncodeLogLevels(l, out);
      break;
    }
    case tp::FrameType::kArena:
    case tp::FrameType::kBlsArena: {
      tp::ArenaBody a;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeArena(b, n, &a));
      (*body)["arena_id"] = a.arena_id;
      (*body)["size"] = a.size;
      tp::EncodeArena(a, out);
      break;
    }
    case tp::FrameType::kExecute: {
      tp::ExecuteBody e;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeExecute(b, n, &e));
      Value reqs = Value::array();
      for (const tp::Request& q : e.requests) reqs.push_back(RequestJson(q));
      (*body)["requests"] = std::move(reqs);
      tp::EncodeExecute(e, out);
      break;
    }
    case tp::FrameType::kResponses: {
      tp::ResponsesBody rb;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeResponses(b, n, &rb));
      Value resps = Value::array();
      for (const tp::Response& p : rb.responses) {
        Value r = Value::object();
        r["batch_id"] = p.batch_id;
        r["request_index"] = p.request_index;
        r["response_flags"] = p.response_flags;
        r["has_error"] = p.has_error;
        r["error_code"] = p.error_code;
        r["error_message"] = p.error_message;
        r["parameters"] = p.parameters;
        Value outs = Value::array();
        for (const tp::Tensor& t : p.outputs) outs.push_back(TensorJson(t));
        r["outputs"] = std::move(outs);
        resps.push_back(std::move(r));
      }
      (*body)["responses"] = std::move(resps);
      tp::EncodeResponses(rb, out);
      break;
    }
    case tp::FrameType::kExecuteDone: {
      tp::ExecuteDoneBody d;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeExecuteDone(b, n, &d));
      (*body)["ok"] = d.ok;
      (*body)["error"] = d.error;
      tp::EncodeExecuteDone(d, out);
      break;
    }
    case tp::FrameType::kLog: {
      tp::LogBody l;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeLog(b, n, &l));
      (*body)["level"] = l.level;
      (*body)["file"] = l.file;
      (*body)["line"] = l.line;
      (*body)["message"] = l.message;
      tp::EncodeLog(l, out);
      break;
    }
    case tp::FrameType::kError: {
      tp::ErrorBody e;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeError(b, n, &e));
      (*body)["message"] = e.message;
      tp::EncodeError(e, out);
      break;
    }
    case tp::FrameType::kRelease:
    case tp::FrameType::kBlsRelease: {
      tp::ReleaseBody r;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeRelease(b, n, &r));
      Value allocs = Value::array();
      for (const tp::ArenaRef& a : r.allocations) {
        Value v = Value::object();
        v["arena_id"] = a.arena_id;
        v["offset"] = a.offset;
        allocs.push_back(std::move(v));
      }
      (*body)["allocations"] = std::move(allocs);
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
  if (tp::FrameTypeName(f.type) != tritonpy::json::GetString(entry, "type")) {
    return std::string("type ") + tp::FrameTypeName(f.type) + ", expected " +
           tritonpy::json::GetString(entry, "type");
  }
  const Value* id = tritonpy::json::Find(entry, "id");
  if (id == nullptr || Value(f.id) != *id) {
    return "id " + std::to_string(f.id) + " differs";
  }
  if (static_cast<int64_t>(f.flags) !=
      tritonpy::json::GetInt(entry, "flags", -1)) {
    return "flags " + std::to_string(f.flags) + " differ";
  }
  const Value* want = tritonpy::json::Find(entry, "body");
  if (want == nullptr || !Same(body, *want)) {
    return "body differs: got " + tritonpy::json::Write(body) + " expected " +
           (want ? tritonpy::json::Write(*want) : std::string("nothing"));
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
    if (!s2.ok() || !Same(body2, body) || f2.id != f.id || f2.type != f.type) {
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
  for (const Value& entry : entries) {
    std::string file = tritonpy::json::GetString(entry, "file");
    std::string bytes;
    std::string why;
    if (!ReadFile(dir + "/" + file, &bytes)) {
      why = "cannot read the file";
    } else if (tritonpy::json::GetBool(entry, "invalid")) {
      tp::FrameView f;
      Value body;
      std::vector<uint8_t> re;
      if (DecodeFrame(bytes, &f, &body, &re).ok()) {
        why = "accepted an invalid frame (" +
              tritonpy::json::GetString(entry, "why") + ")";
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
