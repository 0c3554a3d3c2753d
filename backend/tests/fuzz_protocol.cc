// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Fuzz target for the backend's frame decoder: every message goes through
// DecodeHeader, then the body (inline, or resolved in a peer arena as the
// reader thread does) through the decoder of its frame type and through
// every other body decoder, and each arena tensor reference of a decoded
// RESPONSES or BLS_REQUEST is resolved against the peer arenas. Built with
// -fsanitize=address,undefined, so a read outside the message or the arena
// aborts the run.
//
// LLVMFuzzerTestOneInput is libFuzzer's entry point (`make fuzz` builds it
// with clang's -fsanitize=fuzzer and -DTRITONPY_LIBFUZZER). Without
// libFuzzer, main() is the standalone driver of fuzz_driver.h:
//
//   tritonpy_fuzz_protocol <corpus-dir> [--seconds S] [--seed N]

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_driver.h"
#include "ipc/arena.h"
#include "protocol/protocol.h"

namespace tp = tritonpy::proto;
using tritonpy::Status;

namespace {

// Peer arenas as the reader thread holds them: ids 1 and 2 exist.
constexpr uint64_t kArenaSize = 1 << 16;

// Our side of the arenas, mapped for the life of the process.
std::vector<std::unique_ptr<tritonpy::MappedArena>>&
Owned()
{
  static std::vector<std::unique_ptr<tritonpy::MappedArena>> owned;
  return owned;
}

tritonpy::PeerArenas&
Peers()
{
  static tritonpy::PeerArenas peers_storage;
  static tritonpy::PeerArenas* peers = [] {
    tritonpy::PeerArenas* p = &peers_storage;
    for (uint32_t id = 1; id <= 2; ++id) {
      std::unique_ptr<tritonpy::MappedArena> arena;
      Status s = tritonpy::MappedArena::Create(id, kArenaSize, &arena);
      if (!s.ok()) {
        std::fprintf(stderr, "arena: %s\n", s.message().c_str());
        std::abort();
      }
      // Bodies and tensors resolved there read arbitrary bytes.
      for (uint64_t i = 0; i < kArenaSize; ++i) {
        arena->base()[i] = static_cast<uint8_t>(i * 131 + id);
      }
      s = p->Add(id, dup(arena->fd()), kArenaSize);
      if (!s.ok()) {
        std::fprintf(stderr, "peer arena: %s\n", s.message().c_str());
        std::abort();
      }
      Owned().push_back(std::move(arena));
    }
    return p;
  }();
  return *peers;
}

// Touches every byte a decoded tensor claims, so that ASan sees any
// reference that escapes its buffer.
// ASan has no redzones around mmap'd arenas: check resolved ranges here.
const uint8_t*
ResolveChecked(uint32_t id, uint64_t offset, uint64_t size)
{
  const uint8_t* data = nullptr;
  if (!Peers().Resolve(id, offset, size, &data).ok()) return nullptr;
  // The peer mapping's base: offset 0 of a known arena always resolves.
  const uint8_t* base = nullptr;
  if (!Peers().Resolve(id, 0, 0, &base).ok()) base = nullptr;
  if (base == nullptr || data < base || size > kArenaSize ||
      data - base > static_cast<ptrdiff_t>(kArenaSize - size)) {
    std::fprintf(
        stderr, "Resolve(%u, %llu, %llu) accepted a range outside the arena\n",
        id, static_cast<unsigned long long>(offset),
        static_cast<unsigned long long>(size));
    std::abort();
  }
  return data;
}

unsigned
Touch(const tp::Tensor& t)
{
  unsigned sum = 0;
  const uint8_t* data = t.data;
  if (t.location != tp::kLocationInline) {
    data = ResolveChecked(t.ref.arena_id, t.ref.offset, t.byte_size);
  }
  if (data == nullptr) return 0;
  for (uint64_t i = 0; i < t.byte_size; ++i) sum += data[i];
  return sum;
}

unsigned
TouchAll(const std::vector<tp::Tensor>& tensors)
{
  unsigned sum = 0;
  for (const tp::Tensor& t : tensors) sum += Touch(t);
  return sum;
}

volatile unsigned g_sink;
// How far inputs got: a valid header; a body some decoder accepted.
uint64_t g_headers_ok = 0;
uint64_t g_bodies_ok = 0;

void
DecodeBody(const uint8_t* body, size_t len)
{
  unsigned sum = 0;
  bool any = false;
  auto ok = [&any](const Status& s) {
    any = any || s.ok();
    return s.ok();
  };
  std::string json;
  (void)tp::DecodeJson(body, len, &json);  // accepts any bytes
  tp::ArenaBody arena;
  (void)ok(tp::DecodeArena(body, len, &arena));
  tp::ExecuteBody execute;
  if (ok(tp::DecodeExecute(body, len, &execute))) {
    for (const tp::Request& r : execute.requests) sum += TouchAll(r.inputs);
  }
  tp::ResponsesBody responses;
  if (ok(tp::DecodeResponses(body, len, &responses))) {
    for (const tp::Response& r : responses.responses) {
      sum += TouchAll(r.outputs);
    }
  }
  tp::ExecuteDoneBody done;
  (void)ok(tp::DecodeExecuteDone(body, len, &done));
  tp::LogBody log;
  (void)ok(tp::DecodeLog(body, len, &log));
  tp::ErrorBody error;
  (void)ok(tp::DecodeError(body, len, &error));
  tp::ReleaseBody release;
  (void)ok(tp::DecodeRelease(body, len, &release));
  (void)ok(tp::DecodeEmpty(body, len));
  tp::CancelBody cancel;
  (void)ok(tp::DecodeCancel(body, len, &cancel));
  tp::SendErrorBody send_error;
  (void)ok(tp::DecodeSendError(body, len, &send_error));
  tp::ReadyBody ready;
  (void)ok(tp::DecodeReady(body, len, &ready));
  tp::LogLevelsBody log_levels;
  (void)ok(tp::DecodeLogLevels(body, len, &log_levels));
  tp::BlsRequestBody bls_request;
  if (ok(tp::DecodeBlsRequest(body, len, &bls_request))) {
    sum += TouchAll(bls_request.request.inputs);
  }
  tp::BlsResponseBody bls_response;
  if (ok(tp::DecodeBlsResponse(body, len, &bls_response))) {
    sum += TouchAll(bls_response.outputs);
  }
  tp::MetricBody metric;
  if (ok(tp::DecodeMetric(body, len, &metric))) {
    for (const tp::MetricOp& op : metric.ops) {
      sum += static_cast<unsigned>(
          op.name.size() + op.description.size() + op.values.size());
      for (const auto& label : op.labels) {
        sum += static_cast<unsigned>(label.first.size() + label.second.size());
      }
    }
  }
  tp::MetricDoneBody metric_done;
  (void)ok(tp::DecodeMetricDone(body, len, &metric_done));
  g_sink = sum;
  if (any) ++g_bodies_ok;
}

}  // namespace

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  // The reader receives into a buffer of exactly the message's length.
  std::vector<uint8_t> msg(data, data + size);
  tp::FrameView f;
  if (tp::DecodeHeader(msg.data(), msg.size(), &f).ok()) {
    ++g_headers_ok;
    const uint8_t* body = f.body;
    if (f.body_in_arena) {
      body = ResolveChecked(f.body_ref.arena_id, f.body_ref.offset, f.body_len);
      if (body == nullptr) return 0;
    }
    DecodeBody(body, f.body_len);
  }
  // Whatever the header says, the decoders also see the raw tail.
  if (size > tp::kHeaderSize) {
    std::vector<uint8_t> tail(data + tp::kHeaderSize, data + size);
    DecodeBody(tail.data(), tail.size());
  }
  return 0;
}

#ifndef TRITONPY_LIBFUZZER
std::string
tritonpy::fuzz::FuzzCounters()
{
  return std::to_string(g_headers_ok) + " valid headers, " +
         std::to_string(g_bodies_ok) + " bodies decoded";
}

int
main(int argc, char** argv)
{
  return tritonpy::fuzz::FuzzMain(argc, argv);
}
#endif  // TRITONPY_LIBFUZZER
