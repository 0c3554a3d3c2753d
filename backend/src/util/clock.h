// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The backend's one clock: steady (statistics, deadlines, backoff), and
// Triton's statistics want nanoseconds of it.
#pragma once

#include <chrono>
#include <cstdint>

namespace tritonpy {

using Clock = std::chrono::steady_clock;

inline uint64_t
NowNs()
{
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          Clock::now().time_since_epoch())
          .count());
}

}  // namespace tritonpy
