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
// LLVMFuzzerTestOneInput is libFuzzer's entry point (build with
// -DTRITONPY_LIBFUZZER and clang's -fsanitize=fuzzer). Without libFuzzer,
// main() is a standalone driver:
//
//   tritonpy_fuzz_protocol <corpus-dir> [--seconds S] [--seed N]
//
// runs every *.bin file of the corpus, then random mutations of them
// (byte flips, interesting integers at field offsets, truncation,
// insertion, splicing) until S seconds have passed, and prints the number
// of inputs run.

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "arena.h"
#include "protocol.h"

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

namespace {

std::vector<std::vector<uint8_t>>
LoadCorpus(const std::string& dir)
{
  std::vector<std::vector<uint8_t>> corpus;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return corpus;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".bin") != 0) {
      continue;
    }
    std::ifstream f(dir + "/" + name, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    corpus.emplace_back(s.begin(), s.end());
  }
  closedir(d);
  return corpus;
}

// Integers that sit on the edges of length and offset checks.
const uint64_t kInteresting[] = {
    0,
    1,
    7,
    8,
    23,
    24,
    40,
    0x7f,
    0x80,
    0xff,
    0x100,
    0xffff,
    0x10000,
    0x1ffff,
    0x20000,
    0xfff8,
    0xfff0,
    0xffc0,
    0x7fffffff,
    0x80000000,
    0xfffffff8,
    0xffffffff,
    0x100000000ull,
    0x7fffffffffffffffull,
    0x8000000000000000ull,
    0xfffffffffffffff8ull,
    0xffffffffffffffffull};

void
Mutate(
    std::vector<uint8_t>* m, const std::vector<std::vector<uint8_t>>& corpus,
    std::mt19937_64* rng)
{
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : (*rng)() % n; };
  const int rounds = 1 + static_cast<int>(pick(6));
  for (int r = 0; r < rounds; ++r) {
    switch (pick(7)) {
      case 0:  // flip a bit
        if (!m->empty()) (*m)[pick(m->size())] ^= 1u << pick(8);
        break;
      case 1:  // a random byte
        if (!m->empty())
          (*m)[pick(m->size())] = static_cast<uint8_t>(pick(256));
        break;
      case 2: {  // an interesting u32 or u64 at an aligned offset
        size_t width = pick(2) ? 8 : 4;
        if (m->size() < width) break;
        size_t at = pick((m->size() - width) / 4 + 1) * 4;
        uint64_t v = kInteresting[pick(sizeof(kInteresting) / 8)];
        if (pick(4) == 0) v += pick(3) - 1;      // off by one
        std::memcpy(m->data() + at, &v, width);  // little-endian host
        break;
      }
      case 3:  // truncate
        if (!m->empty()) m->resize(pick(m->size()));
        break;
      case 4: {  // insert random bytes
        size_t at = pick(m->size() + 1);
        size_t n = 1 + pick(16);
        std::vector<uint8_t> bytes(n);
        for (auto& b : bytes) b = static_cast<uint8_t>(pick(256));
        m->insert(m->begin() + at, bytes.begin(), bytes.end());
        break;
      }
      case 5: {  // erase a range
        if (m->empty()) break;
        size_t at = pick(m->size());
        size_t n = 1 + pick(std::min<size_t>(16, m->size() - at));
        m->erase(m->begin() + at, m->begin() + at + n);
        break;
      }
      case 6: {  // splice: our head, another frame's tail
        const auto& other = corpus[pick(corpus.size())];
        size_t keep = pick(m->size() + 1);
        size_t from = pick(other.size() + 1);
        m->resize(keep);
        m->insert(m->end(), other.begin() + from, other.end());
        break;
      }
    }
  }
  // Keep body_len consistent half of the time, so that mutations reach
  // the body decoders instead of stopping at the header.
  if (m->size() >= tp::kHeaderSize && pick(2) == 0) {
    uint32_t body_len = static_cast<uint32_t>(m->size() - tp::kHeaderSize);
    std::memcpy(m->data() + 16, &body_len, 4);
  }
}

}  // namespace

int
main(int argc, char** argv)
{
  if (argc < 2) {
    std::fprintf(
        stderr, "usage: %s <corpus-dir> [--seconds S] [--seed N]\n", argv[0]);
    return 2;
  }
  double seconds = 5;
  uint64_t seed = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0)
      seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--seed") == 0)
      seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  auto corpus = LoadCorpus(argv[1]);
  if (corpus.empty()) {
    std::fprintf(stderr, "no *.bin files in %s\n", argv[1]);
    return 2;
  }
  for (const auto& input : corpus) {
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::mt19937_64 rng(seed);
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t runs = corpus.size();
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 256; ++i, ++runs) {
      std::vector<uint8_t> m = corpus[rng() % corpus.size()];
      Mutate(&m, corpus, &rng);
      LLVMFuzzerTestOneInput(m.data(), m.size());
    }
  }
  std::printf(
      "%llu inputs (%llu valid headers, %llu bodies decoded), %zu corpus "
      "frames, seed %llu: no fault\n",
      static_cast<unsigned long long>(runs),
      static_cast<unsigned long long>(g_headers_ok),
      static_cast<unsigned long long>(g_bodies_ok), corpus.size(),
      static_cast<unsigned long long>(seed));
  return 0;
}

#endif  // TRITONPY_LIBFUZZER
