// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// ReadinessQueries: the IS_READY queries of one instance and the stub's
// READY answers (TRITONBACKEND_ModelInstanceReady).
//
// Threads: Triton's threads call Check, any number at once; the reader
// thread calls OnAnswer. The queries in flight and their answers are
// GUARDED_BY the instance's mutex (the supervisor's); an answer, or a
// change of the stub, wakes Check through the supervisor's condition
// variable.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "process/stub_supervisor.h"
#include "protocol/protocol.h"
#include "util/error.h"
#include "util/thread_annotations.h"

namespace tritonpy {

class ReadinessQueries {
 public:
  // `describe`: "model 'm' instance 'i'", for messages; `instance`:
  // Triton's name of the instance ("m_0_0"), for the official texts;
  // `timeout_s`: ready-timeout-seconds.
  ReadinessQueries(
      std::string describe, std::string instance, StubSupervisor* stub,
      double timeout_s);

  // OK when the stub runs and, if the model defines is_ready(), that
  // answered true within the timeout; else UNAVAILABLE with the reason.
  // With no stub running, or one that went away while asked, the official
  // backend's text comes first ("Stub process '<instance>' is not
  // healthy."), then tritonpy's.
  Status Check() EXCLUDES(stub_->mu);
  // Reader thread: the stub's READY frame for `query_id`. Answers to
  // queries that timed out are dropped.
  void OnAnswer(uint64_t query_id, const proto::ReadyBody& answer)
      EXCLUDES(stub_->mu);

 private:
  const std::string describe_;
  const std::string instance_;
  StubSupervisor* const stub_;
  const double timeout_s_;
  uint64_t next_query_id_ GUARDED_BY(stub_->mu) = 1;
  std::set<uint64_t> queries_ GUARDED_BY(stub_->mu);
  std::map<uint64_t, proto::ReadyBody> answers_ GUARDED_BY(stub_->mu);
};

}  // namespace tritonpy
