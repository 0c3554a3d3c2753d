// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Building one EXECUTE frame from the requests of an Execute call.
#pragma once

#include <cstdint>
#include <vector>

#include "instance/batch.h"
#include "ipc/arena.h"
#include "model/model_state.h"
#include "triton_c_api/triton_api.h"
#include "util/error.h"

namespace tritonpy {

// Fills batch->requests from `requests` and encodes the EXECUTE frame for
// the ones that can go to the stub into `frame` (batch->wire_index lists
// them). A request that cannot be read (GPU input, Triton error) gets its
// error response right away and is left out. Tensors of up to 64 KiB go
// inline while the frame stays under MAX_FRAME; others, and the whole body
// if it is still too large, go into `allocator` space recorded in
// batch->allocations. In decoupled mode each request sent to the stub gets
// a response factory (BatchRequest::factory). Fails only when arena space
// cannot be had; then the caller fails the remaining requests.
Status BuildExecute(
    const ModelState& model, TRITONBACKEND_Request** requests, uint32_t count,
    ArenaAllocator* allocator, Batch* batch, std::vector<uint8_t>* frame);

}  // namespace tritonpy
