// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// IdleCounters: with TRITONPY_DEBUG=1, one instance's resource counters
// (batches, requests, arena bytes, BLS calls and their arena bytes),
// logged by the reader thread at idle when they changed since the last
// line, at most every kPeriodMs (docs/configuration.md). Reader thread
// only.
#pragma once

#include <chrono>
#include <string>

#include "bls/bls.h"
#include "instance/admission_gate.h"
#include "instance/batch_arenas.h"
#include "instance/batch_table.h"

namespace tritonpy {

class IdleCounters {
 public:
  static constexpr int kPeriodMs = 100;

  // Where the counters are read; all belong to the InstanceState.
  struct Sources {
    BatchTable* table;
    AdmissionGate* gate;  // batches pending
    BatchArenas* arenas;  // bytes allocated
    Bls* bls;             // may be null
  };

  // `describe`: "model 'm' instance 'i'". Enabled by TRITONPY_DEBUG.
  IdleCounters(std::string describe, const Sources& sources);

  bool enabled() const { return enabled_; }
  // Logs the line when it is new and due. Returns -1, or how long the
  // reader may block before a changed line is due.
  int Log();

 private:
  const std::string describe_;
  const Sources sources_;
  bool enabled_ = false;
  std::string last_line_;
  std::chrono::steady_clock::time_point last_log_;
};

}  // namespace tritonpy
