// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "fuzz_driver.h"

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "protocol/protocol.h"

namespace tritonpy {
namespace fuzz {

namespace tp = tritonpy::proto;

namespace {

std::vector<std::vector<uint8_t>>
LoadCorpus(const std::string& dir)
{
  std::vector<std::vector<uint8_t>> corpus;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return corpus;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".bin") == 0) {
      names.push_back(name);
    }
  }
  closedir(d);
  // In name order, whatever the directory's: a seed replays the same run.
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::ifstream f(dir + "/" + name, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    corpus.emplace_back(s.begin(), s.end());
  }
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
FuzzMain(int argc, char** argv)
{
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: %s <corpus-dir> [--seconds S] [--min-inputs N] [--seed N]\n",
        argv[0]);
    return 2;
  }
  double seconds = 5;
  uint64_t min_inputs = 0;
  uint64_t seed = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0)
      seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--min-inputs") == 0)
      min_inputs = std::strtoull(argv[i + 1], nullptr, 10);
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
  while (std::chrono::steady_clock::now() < end || runs < min_inputs) {
    for (int i = 0; i < 256; ++i, ++runs) {
      std::vector<uint8_t> m = corpus[rng() % corpus.size()];
      Mutate(&m, corpus, &rng);
      LLVMFuzzerTestOneInput(m.data(), m.size());
    }
  }
  std::printf(
      "%llu inputs (%s), %zu corpus frames, seed %llu: no fault\n",
      static_cast<unsigned long long>(runs), FuzzCounters().c_str(),
      corpus.size(), static_cast<unsigned long long>(seed));
  return 0;
}

}  // namespace fuzz
}  // namespace tritonpy
