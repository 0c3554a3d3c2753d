// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/idle_counters.h"

#include <cstdint>
#include <cstdlib>
#include <utility>

#include "triton/triton_util.h"
#include "util/clock.h"

namespace tritonpy {

IdleCounters::IdleCounters(std::string describe, const Sources& sources)
    : describe_(std::move(describe)), sources_(sources)
{
  enabled_ = DebugCountersEnabled();
}

int
IdleCounters::Log()
{
  uint64_t bls_calls = 0;
  uint64_t bls_bytes = 0;
  if (sources_.bls != nullptr) {
    sources_.bls->DebugCounters(&bls_calls, &bls_bytes);
  }
  uint64_t arena_bytes;
  {
    MutexLock lock(&sources_.arenas->mu);
    arena_bytes = sources_.arenas->allocator.allocated_bytes();
  }
  const BatchTable& table = *sources_.table;
  const size_t pending = sources_.gate->pending_count();
  // key=value pairs: Triton's log escapes quotes, so no JSON.
  std::string line = "batches_total=" + std::to_string(table.adopted_total()) +
                     " batches=" + std::to_string(table.size() + pending) +
                     " requests=" + std::to_string(table.open_requests()) +
                     " arena_bytes=" + std::to_string(arena_bytes) +
                     " bls_calls=" + std::to_string(bls_calls) +
                     " bls_arena_bytes=" + std::to_string(bls_bytes);
  if (line == last_line_) return -1;
  const auto now = Clock::now();
  const auto due = last_log_ + std::chrono::milliseconds(kPeriodMs);
  if (now < due) {
    return static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(due - now)
            .count() +
        1);
  }
  last_line_ = line;
  last_log_ = now;
  TRITONPY_LOG_INFO("tritonpy-debug backend " + describe_ + " idle: " + line);
  return -1;
}

}  // namespace tritonpy
