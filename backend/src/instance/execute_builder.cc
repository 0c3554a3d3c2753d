// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/execute_builder.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "instance/response_writer.h"
#include "protocol/protocol.h"
#include "protocol/protocol_frames.h"
#include "triton/params.h"
#include "triton/triton_util.h"
#include "triton_c_api/triton_infer_api.h"

namespace tritonpy {

namespace {

// One input before placement: its buffers as Triton gave them.
struct PendingInput {
  proto::Tensor* tensor;
  std::vector<std::pair<const uint8_t*, uint64_t>> parts;
  uint32_t request = 0;  // its index in the batch's requests
};

// Triton's names of the wire data types (TRITONSERVER_DataType values).
const char* const kTypeNames[] = {
    "INVALID", "BOOL",  "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
    "INT32",   "INT64", "FP16",  "FP32",   "FP64",   "BYTES",  "BF16"};

// Checks what the stub must be able to trust of input `t` (docs/protocol.md,
// "Tensors") before it goes into a frame: a known data type, at most 64
// dimensions, none negative, and a shape that fits its `byte_size`,
// computed without overflow. Triton 2.51 lets some through (a ragged
// shape whose byte size wraps to the size of an empty binary input).
Status
CheckInput(
    const ModelState& model, const std::string& request_id,
    const proto::Tensor& t)
{
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArg(
        "tritonpy: model '" + model.name() + "' request '" + request_id +
        "': input '" + t.name + "' " + why);
  };
  if (t.dtype < 1 || t.dtype > 14) {
    return bad(
        "has data type " + std::to_string(t.dtype) +
        ", which tritonpy does not know");
  }
  if (t.dims.size() > proto::kMaxNdim) {
    return bad(
        "has " + std::to_string(t.dims.size()) + " dimensions, at most " +
        std::to_string(proto::kMaxNdim));
  }
  for (int64_t d : t.dims) {
    if (d < 0) {
      return bad("has a negative dimension: " + proto::ShapeText(t.dims));
    }
  }
  uint64_t elements = 0;
  const bool overflow = !proto::ElementCount(t.dims, &elements);
  // Only for a message: no string is built for a good input.
  const auto shape = [&]() {
    return std::string(kTypeNames[t.dtype]) + " shape " +
           proto::ShapeText(t.dims);
  };
  const uint32_t item = proto::DataTypeByteSize(t.dtype);
  // numpy refuses an array whose non-zero dimensions, times its item size
  // (8 for the object array of a BYTES input), pass 2^63 - 1 bytes, even
  // when another dimension is 0: as_numpy() would fail in the model.
  uint64_t span = item == 0 ? 8 : item;
  for (int64_t d : t.dims) {
    if (d != 0 &&
        (__builtin_mul_overflow(span, static_cast<uint64_t>(d), &span) ||
         span > static_cast<uint64_t>(INT64_MAX))) {
      return bad(
          "has " + shape() +
          ", whose dimensions multiply past 2^63 bytes (numpy's limit)");
    }
  }
  if (item == 0) {
    // BYTES: each element takes at least its 4-byte length.
    if (overflow || elements > t.byte_size / 4) {
      return bad(
          "has " + shape() + ", more elements than its " +
          std::to_string(t.byte_size) + " bytes can hold");
    }
    return Status();
  }
  uint64_t need = 0;
  if (overflow || __builtin_mul_overflow(elements, item, &need)) {
    return bad(
        "has " + shape() + ", whose byte size overflows 64 bits (the request " +
        "carries " + std::to_string(t.byte_size) + " bytes)");
  }
  if (need != t.byte_size) {
    return bad(
        "has " + shape() + ", which needs " + std::to_string(need) +
        " bytes; the request carries " + std::to_string(t.byte_size));
  }
  return Status();
}

constexpr uint32_t kBytesType = 13;  // TRITONSERVER_TYPE_BYTES

// A BYTES input's serialization (per element a u32 length, then as many
// bytes), walked across Triton's buffers: exactly as many elements as its
// shape has, ending where its bytes end. Else the model's as_numpy() would
// fail, and with it every request of the batch.
Status
CheckBytes(
    const ModelState& model, const std::string& request_id,
    const proto::Tensor& t,
    const std::vector<std::pair<const uint8_t*, uint64_t>>& parts)
{
  uint64_t elements = 0;
  proto::ElementCount(t.dims, &elements);  // checked by CheckInput
  size_t part = 0;
  uint64_t at = 0;  // in parts[part]
  // Reads `n` bytes (into `out` unless null); false past the end.
  const auto take = [&](uint64_t n, uint8_t* out) {
    while (n > 0) {
      if (part == parts.size()) return false;
      const uint64_t here = std::min(n, parts[part].second - at);
      if (out != nullptr) {
        memcpy(out, parts[part].first + at, here);
        out += here;
      }
      at += here;
      n -= here;
      if (at == parts[part].second) {
        ++part;
        at = 0;
      }
    }
    return true;
  };
  uint64_t total = 0;  // what the buffers hold
  for (const auto& p : parts) total += p.second;
  uint64_t consumed = 0;
  for (uint64_t i = 0; i < elements; ++i) {
    uint8_t len[4];
    const auto where = [&]() {
      return "tritonpy: model '" + model.name() + "' request '" + request_id +
             "': input '" + t.name + "': BYTES element " + std::to_string(i) +
             " of " + std::to_string(elements);
    };
    if (!take(4, len)) {
      return Status::InvalidArg(
          where() + ": its " + std::to_string(total) +
          " bytes end inside the element's 4-byte length");
    }
    consumed += 4;
    const uint64_t n = uint64_t{len[0]} | uint64_t{len[1]} << 8 |
                       uint64_t{len[2]} << 16 | uint64_t{len[3]} << 24;
    if (!take(n, nullptr)) {
      // The official backend's text first: clients compare it.
      return Status::InvalidArg(
          "incomplete string data for inference input '" + t.name +
          "', expecting string of length " + std::to_string(n) + " but only " +
          std::to_string(t.byte_size - consumed) + " bytes available (" +
          where() + ")");
    }
    consumed += n;
  }
  if (part != parts.size()) {
    return Status::InvalidArg(
        "tritonpy: model '" + model.name() + "' request '" + request_id +
        "': input '" + t.name + "': bytes are left after its " +
        std::to_string(elements) + " BYTES elements");
  }
  return Status();
}

// Reads one request's metadata and input buffers, appending its inputs
// to `inputs` (the caller drops them again when this fails). Its texts
// become valid UTF-8: a client may send any bytes.
Status
ReadRequest(
    const ModelState& model, TRITONBACKEND_Request* request, BatchRequest* breq,
    proto::Request* wire, std::vector<PendingInput>* inputs)
{
  const char* id = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(TRITONBACKEND_RequestId(request, &id));
  wire->request_id = proto::ValidUtf8(id != nullptr ? id : "");
  breq->id = wire->request_id;

  uint64_t corr = 0;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestCorrelationId(request, &corr);
  if (err == nullptr) {
    wire->correlation_kind = corr != 0 ? 1 : 0;
    wire->correlation_u64 = corr;
  } else {
    // The id is a string.
    TRITONSERVER_ErrorDelete(err);
    const char* scorr = nullptr;
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONBACKEND_RequestCorrelationIdString(request, &scorr));
    wire->correlation_str = proto::ValidUtf8(scorr != nullptr ? scorr : "");
    wire->correlation_kind = wire->correlation_str.empty() ? 0 : 2;
  }
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_RequestFlags(request, &wire->flags));
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_InferenceRequestTimeoutMicroseconds(
          request, &wire->timeout_us));
  TRITONPY_RETURN_IF_ERROR(RequestParametersToJson(request, &wire->parameters));
  // A trace's context exists in OpenTelemetry mode only; a server built
  // without tracing answers an error: no trace then.
  TRITONSERVER_InferenceTrace* trace = nullptr;
  TRITONSERVER_Error* terr = TRITONBACKEND_RequestTrace(request, &trace);
  const char* context = nullptr;
  if (terr == nullptr && trace != nullptr) {
    terr = TRITONSERVER_InferenceTraceContext(trace, &context);
  }
  if (terr != nullptr) TRITONSERVER_ErrorDelete(terr);
  if (context != nullptr) wire->trace_context = proto::ValidUtf8(context);

  uint32_t nout = 0;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_RequestOutputCount(request, &nout));
  wire->requested_outputs.reserve(nout);
  for (uint32_t i = 0; i < nout; ++i) {
    const char* name = nullptr;
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONBACKEND_RequestOutputName(request, i, &name));
    wire->requested_outputs.push_back(proto::ValidUtf8(name));
    breq->requested_outputs.insert(wire->requested_outputs.back());
  }

  uint32_t nin = 0;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_RequestInputCount(request, &nin));
  wire->inputs.resize(nin);
  for (uint32_t i = 0; i < nin; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONBACKEND_RequestInputByIndex(request, i, &input));
    const char* name = nullptr;
    TRITONSERVER_DataType dtype;
    const int64_t* shape = nullptr;
    uint32_t ndim = 0;
    uint64_t byte_size = 0;
    uint32_t nbuf = 0;
    TRITONPY_RETURN_IF_TRITON_ERROR(TRITONBACKEND_InputProperties(
        input, &name, &dtype, &shape, &ndim, &byte_size, &nbuf));
    proto::Tensor& t = wire->inputs[i];
    t.name = proto::ValidUtf8(name);
    t.dtype = static_cast<uint32_t>(dtype);
    t.dims.assign(shape, shape + ndim);
    t.byte_size = byte_size;
    TRITONPY_RETURN_IF_ERROR(CheckInput(model, breq->id, t));
    if (i == 0 && model.max_batch_size() > 0 && ndim > 0 && shape[0] > 0) {
      breq->batch_size = static_cast<uint64_t>(shape[0]);
    }
    PendingInput pending{&t, {}};
    uint64_t total = 0;
    for (uint32_t b = 0; b < nbuf; ++b) {
      const void* buf = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
      int64_t mem_id = 0;
      TRITONPY_RETURN_IF_TRITON_ERROR(
          TRITONBACKEND_InputBuffer(input, b, &buf, &size, &mem, &mem_id));
      if (mem == TRITONSERVER_MEMORY_GPU) {
        return Status::Unsupported(
            "tritonpy: model '" + model.name() + "' request '" + breq->id +
            "': input '" + t.name +
            "' is in GPU memory; tritonpy supports "
            "CPU inputs only for now");
      }
      if (size > 0)
        pending.parts.emplace_back(static_cast<const uint8_t*>(buf), size);
      total += size;
    }
    if (total != byte_size) {
      return Status::InvalidArg(
          "tritonpy: model '" + model.name() + "' request '" + breq->id +
          "': input '" + t.name + "' buffers hold " + std::to_string(total) +
          " bytes, expected " + std::to_string(byte_size));
    }
    if (t.dtype == kBytesType) {
      TRITONPY_RETURN_IF_ERROR(CheckBytes(model, breq->id, t, pending.parts));
    }
    inputs->push_back(std::move(pending));
  }
  return Status();
}

// Encoded size of the body if every tensor went to an arena.
size_t
MetadataSize(const proto::ExecuteBody& body)
{
  size_t n = 4;
  for (const proto::Request& q : body.requests) {
    n += 4 + q.request_id.size() + 1 + 8 + 4 + q.correlation_str.size() + 4 +
         8 + 4 + q.parameters.size() + 4 + 4;
    for (const std::string& s : q.requested_outputs) n += 4 + s.size();
    for (const proto::Tensor& t : q.inputs) {
      n += 4 + t.name.size() + 4 + 4 + 8 * t.dims.size() + 8 + 1 +
           proto::kArenaRefSize;
    }
  }
  return n;
}

void
CopyParts(const PendingInput& in, uint8_t* dst)
{
  for (const auto& part : in.parts) {
    memcpy(dst, part.first, part.second);
    dst += part.second;
  }
}

}  // namespace

Status
BuildExecute(
    const ModelState& model, TRITONBACKEND_Request** requests, uint32_t count,
    ArenaAllocator* allocator, Batch* batch, std::vector<uint8_t>* frame)
{
  proto::ExecuteBody body;
  body.requests.reserve(count);
  batch->requests.resize(count);
  std::vector<PendingInput> inputs;
  inputs.reserve(count * 2);  // two each, as a guess
  for (uint32_t i = 0; i < count; ++i) {
    BatchRequest* breq = &batch->requests[i];
    breq->request = requests[i];
    proto::Request wire;
    const size_t first = inputs.size();  // where its inputs start
    Status s = ReadRequest(model, requests[i], breq, &wire, &inputs);
    if (s.ok() && model.decoupled()) {
      s = FromTriton(
          TRITONBACKEND_ResponseFactoryNew(&breq->factory, requests[i]));
    }
    if (!s.ok()) {
      inputs.resize(first);
      RespondWithError(breq, s);
      continue;
    }
    // Moving `wire` moves its inputs vector's buffer, not the tensors:
    // the PendingInput pointers stay valid.
    body.requests.push_back(std::move(wire));
    breq->wire_pos = static_cast<uint32_t>(batch->wire_index.size());
    batch->wire_index.push_back(i);
    for (size_t k = first; k < inputs.size(); ++k) inputs[k].request = i;
  }
  // Placement: inline while the frame fits, the rest in the arena.
  int64_t budget = static_cast<int64_t>(proto::kMaxFrame - proto::kHeaderSize) -
                   static_cast<int64_t>(MetadataSize(body));
  // A request whose input finds no arena space fails alone (its
  // allocations are given back), with the official text first.
  std::vector<bool> dropped;  // by request index, once one is
  bool any_dropped = false;
  uint32_t current = count;    // the request whose inputs are being placed
  size_t its_allocations = 0;  // where its allocations start
  for (PendingInput& in : inputs) {
    proto::Tensor* t = in.tensor;
    if (in.request != current) {
      current = in.request;
      its_allocations = batch->allocations.size();
    }
    if (any_dropped && dropped[in.request]) continue;
    int64_t extra = static_cast<int64_t>(t->byte_size) + 7 -
                    static_cast<int64_t>(proto::kArenaRefSize);
    if (t->byte_size <= proto::kMaxInlineTensor && extra <= budget) {
      budget -= extra;
      t->location = proto::kLocationInline;
      if (in.parts.size() == 1) {
        t->data = in.parts[0].first;  // Triton's buffer, alive until release
      } else {
        batch->scratch.emplace_back(t->byte_size);
        CopyParts(in, batch->scratch.back().data());
        t->data = batch->scratch.back().data();
      }
      continue;
    }
    Allocation a;
    Status placed = allocator->Allocate(t->byte_size, &a);
    if (!placed.ok()) {
      BatchRequest* breq = &batch->requests[in.request];
      RespondWithError(
          breq,
          placed.WithPrefix(
              "Failed to increase the shared memory pool size: "
              "tritonpy: model '" +
              model.name() + "' request '" + breq->id + "': input '" + t->name +
              "' of " + std::to_string(t->byte_size) + " bytes: "));
      for (size_t k = its_allocations; k < batch->allocations.size(); ++k) {
        allocator->Free(
            batch->allocations[k].arena_id, batch->allocations[k].offset);
      }
      batch->allocations.resize(its_allocations);
      dropped.resize(count);
      dropped[in.request] = true;
      any_dropped = true;
      continue;
    }
    batch->allocations.push_back(a);
    CopyParts(in, a.ptr);
    t->location = proto::kLocationArena;
    t->data = nullptr;
    t->ref.arena_id = a.arena_id;
    t->ref.offset = a.offset;
  }

  if (any_dropped) {
    std::vector<proto::Request> kept;
    std::vector<size_t> index;
    for (size_t w = 0; w < batch->wire_index.size(); ++w) {
      const size_t i = batch->wire_index[w];
      if (dropped[i]) continue;
      batch->requests[i].wire_pos = static_cast<uint32_t>(index.size());
      index.push_back(i);
      kept.push_back(std::move(body.requests[w]));
    }
    body.requests = std::move(kept);
    batch->wire_index = std::move(index);
    if (batch->wire_index.empty()) return Status();  // nothing to send
  }
  proto::ExecuteFrame(batch->id, body, frame);
  if (frame->size() > proto::kMaxFrame) {
    // Still too large (huge metadata): the body moves to the arena.
    size_t body_len = frame->size() - proto::kHeaderSize;
    if (body_len > UINT32_MAX) {
      return Status::InvalidArg("tritonpy: EXECUTE body over 4 GiB");
    }
    Allocation a;
    TRITONPY_RETURN_IF_ERROR(allocator->Allocate(body_len, &a));
    batch->allocations.push_back(a);
    memcpy(a.ptr, frame->data() + proto::kHeaderSize, body_len);
    *frame = proto::ExecuteRefFrame(
        batch->id, static_cast<uint32_t>(body_len), {a.arena_id, a.offset});
  }
  return Status();
}

}  // namespace tritonpy
