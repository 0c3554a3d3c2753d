// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "util/log_limiter.h"

#include <cstdio>

namespace tritonpy {

TokenBucket::TokenBucket(uint64_t rate, uint64_t burst, Clock::time_point now)
    : rate_(rate),
      burst_(static_cast<double>(burst)),
      tokens_(static_cast<double>(burst)),
      last_(now)
{
}

bool
TokenBucket::Take(uint64_t n, Clock::time_point now)
{
  if (now > last_) {
    const double seconds = std::chrono::duration<double>(now - last_).count();
    tokens_ += seconds * static_cast<double>(rate_);
    if (tokens_ > burst_) tokens_ = burst_;
    last_ = now;
  }
  const double want = static_cast<double>(n);
  if (want > tokens_) return false;
  tokens_ -= want;
  return true;
}

LogLimiter::LogLimiter(uint64_t bytes_per_second, Clock::time_point now)
    : bucket_(bytes_per_second, bytes_per_second * kBurstSeconds, now)
{
}

bool
LogLimiter::Admit(
    uint64_t text_bytes, Clock::time_point now, std::string* report)
{
  MutexLock lock(&mu_);
  // Both terms are bounded by a frame body (u32): no wrap.
  const uint64_t cost = text_bytes + kLineCost;
  const bool pass = bucket_.Take(cost, now);
  if (!pass) {
    ++dropped_lines_;
    dropped_bytes_ += text_bytes;
  }
  if (dropped_lines_ > 0 &&
      (!reported_ || now - last_report_ >= kReportInterval)) {
    *report = TakeReport();
    reported_ = true;
    last_report_ = now;
  }
  return pass;
}

std::string
LogLimiter::Flush()
{
  MutexLock lock(&mu_);
  return TakeReport();
}

std::string
LogLimiter::TakeReport()
{
  if (dropped_lines_ == 0) return "";
  char mb[32];
  std::snprintf(
      mb, sizeof(mb), "%.1f", static_cast<double>(dropped_bytes_) / 1e6);
  std::string out =
      "dropped " + std::to_string(dropped_lines_) + " log line" +
      (dropped_lines_ == 1 ? "" : "s") + " (" + mb +
      " MB) over stub-log-bytes-per-second=" + std::to_string(bucket_.rate());
  dropped_lines_ = 0;
  dropped_bytes_ = 0;
  return out;
}

}  // namespace tritonpy
