// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// METRIC and METRIC_DONE bodies (docs/protocol.md, Custom metrics).

#include "protocol/protocol.h"
#include "protocol/protocol_codec.h"

namespace tritonpy {
namespace proto {

using codec::Reader;
using codec::Violation;
using codec::Writer;

namespace {

Status
ReadMetricOp(Reader* r, MetricOp* op)
{
  uint8_t code;
  TRITONPY_RETURN_IF_ERROR(r->U8(&code));
  op->op = static_cast<MetricOpCode>(code);
  switch (op->op) {
    case MetricOpCode::kFamilyNew:
      TRITONPY_RETURN_IF_ERROR(r->U32(&op->family));
      TRITONPY_RETURN_IF_ERROR(r->U32(&op->kind));
      if (op->kind > kMaxMetricKind) {
        return Violation("unknown metric kind " + std::to_string(op->kind));
      }
      TRITONPY_RETURN_IF_ERROR(r->Str(&op->name));
      return r->Str(&op->description);
    case MetricOpCode::kFamilyDelete:
      return r->U32(&op->family);
    case MetricOpCode::kMetricNew: {
      TRITONPY_RETURN_IF_ERROR(r->U32(&op->metric));
      TRITONPY_RETURN_IF_ERROR(r->U32(&op->family));
      uint32_t n;
      TRITONPY_RETURN_IF_ERROR(r->Count(kF64Size, &n));
      op->labels.assign(n, {});
      for (auto& label : op->labels) {
        TRITONPY_RETURN_IF_ERROR(r->Str(&label.first));
        TRITONPY_RETURN_IF_ERROR(r->Str(&label.second));
      }
      TRITONPY_RETURN_IF_ERROR(r->Count(kF64Size, &n));
      op->values.assign(n, 0.0);
      for (double& b : op->values) TRITONPY_RETURN_IF_ERROR(r->F64(&b));
      return Status();
    }
    case MetricOpCode::kMetricDelete:
    case MetricOpCode::kValue:
      return r->U32(&op->metric);
    case MetricOpCode::kIncrement:
    case MetricOpCode::kSet:
      TRITONPY_RETURN_IF_ERROR(r->U32(&op->metric));
      return r->F64(&op->value);
    case MetricOpCode::kObserve: {
      TRITONPY_RETURN_IF_ERROR(r->U32(&op->metric));
      uint32_t n;
      TRITONPY_RETURN_IF_ERROR(r->Count(kF64Size, &n));
      op->values.assign(n, 0.0);
      for (double& v : op->values) TRITONPY_RETURN_IF_ERROR(r->F64(&v));
      return Status();
    }
  }
  return Violation("unknown metric op " + std::to_string(code));
}

void
WriteMetricOp(Writer* w, const MetricOp& op)
{
  w->U8(static_cast<uint8_t>(op.op));
  switch (op.op) {
    case MetricOpCode::kFamilyNew:
      w->U32(op.family);
      w->U32(op.kind);
      w->Str(op.name);
      w->Str(op.description);
      break;
    case MetricOpCode::kFamilyDelete:
      w->U32(op.family);
      break;
    case MetricOpCode::kMetricNew:
      w->U32(op.metric);
      w->U32(op.family);
      w->U32(static_cast<uint32_t>(op.labels.size()));
      for (const auto& label : op.labels) {
        w->Str(label.first);
        w->Str(label.second);
      }
      w->U32(static_cast<uint32_t>(op.values.size()));
      for (double b : op.values) w->F64(b);
      break;
    case MetricOpCode::kMetricDelete:
    case MetricOpCode::kValue:
      w->U32(op.metric);
      break;
    case MetricOpCode::kIncrement:
    case MetricOpCode::kSet:
      w->U32(op.metric);
      w->F64(op.value);
      break;
    case MetricOpCode::kObserve:
      w->U32(op.metric);
      w->U32(static_cast<uint32_t>(op.values.size()));
      for (double v : op.values) w->F64(v);
      break;
  }
}

}  // namespace

Status
DecodeMetric(const uint8_t* body, size_t len, MetricBody* out)
{
  Reader r(body, len);
  uint32_t n;
  TRITONPY_RETURN_IF_ERROR(r.Count(kMetricOpMinSize, &n));
  out->ops.assign(n, MetricOp());
  for (MetricOp& op : out->ops) TRITONPY_RETURN_IF_ERROR(ReadMetricOp(&r, &op));
  return r.Done();
}

Status
DecodeMetricDone(const uint8_t* body, size_t len, MetricDoneBody* out)
{
  Reader r(body, len);
  TRITONPY_RETURN_IF_ERROR(r.U8(&out->ok));
  TRITONPY_RETURN_IF_ERROR(r.Str(&out->error));
  TRITONPY_RETURN_IF_ERROR(r.F64(&out->value));
  return r.Done();
}

void
EncodeMetric(const MetricBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U32(static_cast<uint32_t>(b.ops.size()));
  for (const MetricOp& op : b.ops) WriteMetricOp(&w, op);
}

void
EncodeMetricDone(const MetricDoneBody& b, std::vector<uint8_t>* out)
{
  Writer w(out);
  w.U8(b.ok);
  w.Text(b.error);
  w.F64(b.value);
}

}  // namespace proto
}  // namespace tritonpy
