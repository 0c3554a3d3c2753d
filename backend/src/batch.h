// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Bookkeeping of one Execute call (one EXECUTE frame). The Execute thread
// owns a Batch; while it waits, the instance's reader thread answers its
// requests (BatchRequest::responded) and finally sets `ended` under the
// instance mutex. After `ended` only the Execute thread touches it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "arena.h"
#include "error.h"
#include "tritonpy/triton_api.h"

namespace tritonpy {

struct BatchRequest {
  TRITONBACKEND_Request* request = nullptr;
  std::string id;  // request id, for messages
  std::set<std::string> requested_outputs;
  uint64_t batch_size = 1;
  bool responded = false;  // a final response was sent
  bool success = false;    // ... and it was not an error
};

struct Batch {
  uint64_t id = 0;
  std::vector<BatchRequest> requests;  // in Triton's order
  std::vector<size_t> wire_index;      // EXECUTE position -> requests index
  std::vector<Allocation> allocations;  // backend arena space of the frame
  std::vector<std::vector<uint8_t>> scratch;  // gathered inline inputs
  bool ended = false;
  Status end_status;  // why the batch ended early (stub death, error)
};

}  // namespace tritonpy
