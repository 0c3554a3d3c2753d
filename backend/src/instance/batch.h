// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Bookkeeping of one batch (one Execute call, one EXECUTE frame).
//
// Ownership: the Execute thread builds a Batch and hands it to the
// instance's reader thread (AdmissionGate::Register) before sending the
// EXECUTE frame. From then on only the reader thread touches it
// (responses, cancellation polls, stub death). Its state is written under
// the instance mutex, by the AdmissionGate only, because the Execute
// thread of a sync instance waits on it; the reader reads it without.
// Once every request is complete and the stub has said that execute
// returned, the reader ends the batch: batch statistics, arena space
// freed.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ipc/arena.h"
#include "triton_c_api/triton_api.h"
#include "util/error.h"

namespace tritonpy {

// The life of one request in a batch: kOpen -> (kResponded) -> kComplete.
// A rescheduled request is complete without a final response.
enum class RequestState {
  kOpen,       // no final response yet
  kResponded,  // a response with FINAL was sent; not released yet
  kComplete,   // released (FinishRequest): hands off, request is null
};

// The life of a batch (admission_gate.h has the transitions).
enum class BatchState {
  kBuilding,   // Execute is reading its requests; the reader knows nothing
  kPending,    // registered by Execute, not yet adopted by the reader
  kExecuting,  // adopted; the model's execute() has not returned (or not
               // started: a sync instance's batches sent ahead)
  kReturned,   // execute() returned (EXECUTE_DONE, BATCH_DONE or a
               // BATCH_END entry) or the stub went away; decoupled
               // requests may still be open
  kEnded,      // every request complete: statistics reported, arena
               // space freed, out of the reader's table
};

struct BatchRequest {
  TRITONBACKEND_Request* request = nullptr;
  // Decoupled mode; default mode only to send the final flag alone.
  TRITONBACKEND_ResponseFactory* factory = nullptr;
  std::string id;  // request id, for messages
  std::set<std::string> requested_outputs;
  uint64_t batch_size = 1;
  uint32_t wire_pos = 0;  // request_index in the EXECUTE frame
  RequestState state = RequestState::kOpen;
  bool failed = false;    // some response carried an error
  bool answered = false;  // default mode: its one response was sent
  // Default mode: its one response, sent without FINAL by the model and
  // held here until the final flag comes, then sent with it. Triton 2.51's
  // frontends crash on a flags-only final response of a non-decoupled
  // model, and a client of such a model waits for one response anyway.
  TRITONBACKEND_Response* held = nullptr;
  Status held_error;  // the held response's error, if it is an error response
  bool cancel_sent = false;  // a CANCEL entry went to the stub

  // No final response may follow (one was sent, or the request is done).
  bool responded() const { return state != RequestState::kOpen; }
  bool complete() const { return state == RequestState::kComplete; }
  // A response with FINAL is being sent.
  void MarkResponded()
  {
    if (state == RequestState::kOpen) state = RequestState::kResponded;
  }
};

struct Batch {
  uint64_t id = 0;
  bool decoupled = false;
  bool sync_execute = false;  // the model's execute() is not a coroutine
  std::vector<BatchRequest> requests;   // in Triton's order
  std::vector<size_t> wire_index;       // EXECUTE position -> requests index
  std::vector<Allocation> allocations;  // backend arena space of the frame
  uint64_t arena_bytes = 0;             // their total, once registered
  std::vector<std::vector<uint8_t>> scratch;  // gathered inline inputs
  size_t open = 0;                            // requests not complete yet
  BatchState state = BatchState::kBuilding;
  uint64_t exec_start_ns = 0;
  uint64_t compute_start_ns = 0;
  uint64_t compute_end_ns = 0;  // when execute returned

  // The model's execute() returned for this batch (reader thread).
  bool returned() const { return state >= BatchState::kReturned; }
};

}  // namespace tritonpy
