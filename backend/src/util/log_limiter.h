// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The rate limit on what one stub writes to Triton's log through LOG
// frames (stub-log-bytes-per-second, docs/hardening.md): a token bucket of
// bytes, and the count of the lines it dropped, reported in one line at
// most once a second and when the stub goes away.
//
// No Triton calls here: the caller logs what it is told to, so both
// classes are unit-tested on a clock the test moves.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace tritonpy {

// Tokens refill at `rate` per second, up to `burst`; it starts full. Not
// locked: its owner serialises the calls.
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;

  TokenBucket(uint64_t rate, uint64_t burst, Clock::time_point now);

  // Takes `n` tokens when there are that many, else takes none and
  // returns false. A clock that went backwards refills nothing.
  bool Take(uint64_t n, Clock::time_point now);

  uint64_t rate() const { return rate_; }

 private:
  const uint64_t rate_;
  const double burst_;
  double tokens_;  // fractions carry over between refills
  Clock::time_point last_;
};

// One stub's LOG lines: which pass, and what to say about the others. Any
// thread (the reader, or the thread that starts the stub).
class LogLimiter {
 public:
  using Clock = TokenBucket::Clock;
  // Seconds of `bytes_per_second` a burst may take at once.
  static constexpr uint64_t kBurstSeconds = 4;
  // What a line costs on top of its text: empty lines are not free.
  static constexpr uint64_t kLineCost = 64;
  // The least time between two reports of dropped lines.
  static constexpr auto kReportInterval = std::chrono::seconds(1);

  explicit LogLimiter(
      uint64_t bytes_per_second, Clock::time_point now = Clock::now());

  // Whether a line of `text_bytes` (message and file name) passes. When
  // lines were dropped and no report went out for kReportInterval, sets
  // *report to the line to log first ("dropped N log lines (X MB) over
  // stub-log-bytes-per-second=R"), else leaves it empty.
  bool Admit(uint64_t text_bytes, Clock::time_point now, std::string* report)
      EXCLUDES(mu_);
  // The report of the drops not reported yet, or "" (the stub is gone).
  std::string Flush() EXCLUDES(mu_);

 private:
  std::string TakeReport() REQUIRES(mu_);

  Mutex mu_;
  TokenBucket bucket_ GUARDED_BY(mu_);
  uint64_t dropped_lines_ GUARDED_BY(mu_) = 0;
  uint64_t dropped_bytes_ GUARDED_BY(mu_) = 0;
  bool reported_ GUARDED_BY(mu_) = false;  // a report went out at last_report_
  Clock::time_point last_report_ GUARDED_BY(mu_);
};

}  // namespace tritonpy
