// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Fuzz target for the request side: what a client's request becomes on the
// way to the stub. The input describes a batch of Triton requests (ids,
// correlation ids, flags, parameters of every type, requested outputs, and
// inputs with any name, datatype, shape, declared byte size and buffers,
// up to a few hundred KiB each); the fake server (fake_triton.cc) hands
// them to the backend's real BuildExecute, which reads them through the
// TRITONBACKEND_* calls and encodes the EXECUTE frame. Then:
//
//  - the frame decodes (DecodeHeader; a body moved to the arena is found in
//    the batch's allocations; DecodeExecute), and holds exactly the
//    requests that were not refused, in order, with their ids, correlation
//    ids, requested outputs and inputs, and every input's bytes equal to
//    its buffers, inline or in the arena;
//  - every refused request got exactly one final error response naming
//    the model, and no request sent to the stub got any;
//  - no input whose shape disagrees with its byte size reaches the stub:
//    for a fixed-size datatype, every dim is >= 0 and the element count
//    times the element size (checked for overflow) is the byte size. A
//    client makes Triton hand over such a shape with a byte size that
//    wraps at 2^64 (binary_data_size 0): docs/hardening.md, "Hostile
//    clients".
//
// The model is non-batching or batching, default or decoupled, as the
// input says. Built with -fsanitize=address,undefined.
//
//   tritonpy_fuzz_execute <corpus-dir> [--seconds S] [--seed N]
// (fuzz_driver.h), or under libFuzzer with -DTRITONPY_LIBFUZZER.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fake_triton.h"
#include "fuzz_driver.h"
#include "fuzz_input.h"
#include "fuzz_requests.h"
#include "instance/batch.h"
#include "instance/execute_builder.h"
#include "ipc/arena.h"
#include "model/model_state.h"
#include "protocol/protocol.h"

namespace tp = tritonpy::proto;
using tritonpy::fuzz::FuzzInput;
using tritonpy::fuzz::MakeRequest;

namespace {

uint64_t g_batches = 0;
uint64_t g_requests_sent = 0;
uint64_t g_requests_refused = 0;
uint64_t g_inputs_inline = 0;
uint64_t g_inputs_arena = 0;
uint64_t g_bodies_in_arena = 0;

[[noreturn]] void
Fail(const std::string& what)
{
  std::fprintf(stderr, "fuzz_execute: %s\n", what.c_str());
  std::abort();
}

// Element sizes of the fixed-size datatypes; 0 for BYTES and unknown ones.
uint64_t
ElementSize(uint32_t dtype)
{
  switch (dtype) {
    case TRITONSERVER_TYPE_BOOL:
    case TRITONSERVER_TYPE_UINT8:
    case TRITONSERVER_TYPE_INT8:
      return 1;
    case TRITONSERVER_TYPE_UINT16:
    case TRITONSERVER_TYPE_INT16:
    case TRITONSERVER_TYPE_FP16:
    case TRITONSERVER_TYPE_BF16:
      return 2;
    case TRITONSERVER_TYPE_UINT32:
    case TRITONSERVER_TYPE_INT32:
    case TRITONSERVER_TYPE_FP32:
      return 4;
    case TRITONSERVER_TYPE_UINT64:
    case TRITONSERVER_TYPE_INT64:
    case TRITONSERVER_TYPE_FP64:
      return 8;
    default:
      return 0;
  }
}

// Whether `shape` of `dtype` holds exactly `byte_size` bytes (no overflow).
bool
ShapeMatches(const std::vector<int64_t>& shape, uint32_t dtype, uint64_t bytes)
{
  uint64_t n = ElementSize(dtype);
  if (n == 0) return true;  // BYTES: its buffers say its size
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d)) return false;
    n *= static_cast<uint64_t>(d);
  }
  return n == bytes;
}

// The bytes of `t` as the stub would find them.
const uint8_t*
TensorBytes(const tp::Tensor& t, const tritonpy::Batch& batch)
{
  if (t.location == tp::kLocationInline) return t.data;
  if (t.location != tp::kLocationArena) Fail("an input in no known place");
  for (const tritonpy::Allocation& a : batch.allocations) {
    if (a.arena_id == t.ref.arena_id && a.offset == t.ref.offset) {
      if (t.byte_size > a.size) Fail("an input larger than its allocation");
      return a.ptr;
    }
  }
  Fail("an input refers to arena space the batch does not own");
}

void
CheckSent(
    const TRITONBACKEND_Request& fake, const tp::Request& wire,
    const tritonpy::Batch& batch)
{
  // Texts reach the stub as UTF-8: ill-formed bytes become U+FFFD
  // (docs/protocol.md, "Text").
  const auto as_sent = [](const std::string& s) {
    return tp::ValidUtf8(s.c_str());
  };
  if (wire.request_id != as_sent(fake.id)) Fail("id changed");
  if (fake.correlation_is_string) {
    const std::string want = as_sent(fake.correlation_string);
    if (wire.correlation_str != want) Fail("correlation id changed");
  } else if (wire.correlation_u64 != fake.correlation) {
    Fail("numeric correlation id changed");
  }
  if (wire.requested_outputs.size() != fake.outputs.size()) {
    Fail("requested outputs lost");
  }
  if (wire.inputs.size() != fake.inputs.size()) Fail("inputs lost");
  for (size_t i = 0; i < wire.inputs.size(); ++i) {
    const tp::Tensor& t = wire.inputs[i];
    const TRITONBACKEND_Input& src = *fake.inputs[i];
    if (t.name != as_sent(src.name) ||
        t.dtype != static_cast<uint32_t>(src.dtype) || t.dims != src.shape) {
      Fail("an input's name, datatype or shape changed");
    }
    if (!ShapeMatches(t.dims, t.dtype, t.byte_size)) {
      std::string dims;
      for (int64_t d : t.dims)
        dims += (dims.empty() ? "" : ",") + std::to_string(d);
      Fail(
          "input '" + t.name + "' (datatype " + std::to_string(t.dtype) +
          ", shape [" + dims + "]) went to the stub with " +
          std::to_string(t.byte_size) +
          " bytes, which that shape does not hold");
    }
    const uint8_t* p = TensorBytes(t, batch);
    (t.location == tp::kLocationInline ? g_inputs_inline : g_inputs_arena)++;
    uint64_t at = 0;
    for (const std::vector<uint8_t>& buf : src.buffers) {
      if (at + buf.size() > t.byte_size ||
          (!buf.empty() && std::memcmp(p + at, buf.data(), buf.size()) != 0)) {
        Fail("an input's bytes differ from its buffers");
      }
      at += buf.size();
    }
    if (at != t.byte_size) Fail("an input's byte size is not its buffers'");
  }
}

// Decodes the frame BuildExecute made and checks it against the requests.
void
CheckFrame(
    const std::vector<uint8_t>& frame, const tritonpy::Batch& batch,
    const std::vector<std::unique_ptr<TRITONBACKEND_Request>>& requests)
{
  tp::FrameView f;
  if (!tp::DecodeHeader(frame.data(), frame.size(), &f).ok()) {
    Fail("the EXECUTE frame's header does not decode");
  }
  const uint8_t* body = f.body;
  if (f.body_in_arena) {
    ++g_bodies_in_arena;
    body = nullptr;
    for (const tritonpy::Allocation& a : batch.allocations) {
      if (a.arena_id == f.body_ref.arena_id && a.offset == f.body_ref.offset &&
          f.body_len <= a.size) {
        body = a.ptr;
      }
    }
    if (body == nullptr) Fail("the body is in arena space the batch lacks");
  }
  tp::ExecuteBody eb;
  tritonpy::Status s = tp::DecodeExecute(body, f.body_len, &eb);
  if (!s.ok()) Fail("the EXECUTE body does not decode: " + s.message());
  if (eb.requests.size() != batch.wire_index.size()) {
    Fail("the frame's requests are not the batch's");
  }
  size_t next = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const TRITONBACKEND_Request& fake = *requests[i];
    const bool sent =
        next < batch.wire_index.size() && batch.wire_index[next] == i;
    if (sent) {
      if (fake.responses != 0) Fail("a request sent to the stub was answered");
      CheckSent(fake, eb.requests[next], batch);
      ++next;
      ++g_requests_sent;
    } else {
      if (fake.responses != 1 || fake.error_responses != 1 ||
          fake.final_flags != 1) {
        Fail("a refused request did not get exactly one final error");
      }
      if (fake.last_error.find("model 'fuzz'") == std::string::npos) {
        Fail("an error that does not name the model: " + fake.last_error);
      }
      ++g_requests_refused;
    }
  }
}

}  // namespace

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  static tritonpy::ModelState* models[4] = {
      tritonpy::ModelStateTestPeer::Make(0, false),
      tritonpy::ModelStateTestPeer::Make(8, false),
      tritonpy::ModelStateTestPeer::Make(0, true),
      tritonpy::ModelStateTestPeer::Make(8, true)};
  // One allocator for every input, as an instance keeps one: arenas are
  // reused and grown across batches.
  static tritonpy::ArenaAllocator* allocator =
      new tritonpy::ArenaAllocator(1 << 20);

  FuzzInput in(data, size);
  const tritonpy::ModelState& model = *models[in.U8() % 4];
  std::vector<std::unique_ptr<TRITONBACKEND_Request>> requests;
  for (size_t n = 1 + in.U8() % 6; n > 0; --n) {
    requests.push_back(MakeRequest(&in));
  }
  std::vector<TRITONBACKEND_Request*> raw;
  for (auto& r : requests) raw.push_back(r.get());

  tritonpy::Batch batch;
  batch.id = 7;
  std::vector<uint8_t> frame;
  tritonpy::Status s = tritonpy::BuildExecute(
      model, raw.data(), static_cast<uint32_t>(raw.size()), allocator, &batch,
      &frame);
  ++g_batches;
  if (s.ok()) CheckFrame(frame, batch, requests);
  for (tritonpy::BatchRequest& r : batch.requests) {
    if (r.factory != nullptr) TRITONBACKEND_ResponseFactoryDelete(r.factory);
  }
  for (const tritonpy::Allocation& a : batch.allocations) {
    allocator->Free(a.arena_id, a.offset);
  }
  return 0;
}

#ifndef TRITONPY_LIBFUZZER
std::string
tritonpy::fuzz::FuzzCounters()
{
  return std::to_string(g_batches) + " batches built, " +
         std::to_string(g_requests_sent) + " requests sent, " +
         std::to_string(g_requests_refused) + " requests refused, " +
         std::to_string(g_inputs_inline) + " inputs inline, " +
         std::to_string(g_inputs_arena) + " inputs in arenas, " +
         std::to_string(g_bodies_in_arena) + " bodies in arenas";
}

int
main(int argc, char** argv)
{
  return tritonpy::fuzz::FuzzMain(argc, argv);
}
#endif  // TRITONPY_LIBFUZZER
