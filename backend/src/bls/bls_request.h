// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// A BLS_REQUEST turned into a TRITONSERVER_InferenceRequest, without the
// call bookkeeping of bls.h: the inputs copied out of the frame and the
// stub's arenas (the frame buffer is reused and the stub's arena space
// goes back at once, while the Triton request may live longer than the
// stub), and the request's fields set from the wire request. Reader
// thread; keeps nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "ipc/arena.h"
#include "protocol/protocol.h"
#include "triton_c_api/triton_infer_api.h"
#include "util/error.h"

namespace tritonpy {

// Where the inputs of one BLS_REQUEST are and where they go in one copy
// (each at a 64-byte aligned offset).
struct BlsInputPlan {
  std::vector<const uint8_t*> src;  // input i's bytes in the frame or arena
  std::vector<uint64_t> offsets;    // input i's offset in the copy
  uint64_t total = 0;               // bytes of the copy
};

// Plans the copy of `q`'s inputs (BLS call `call_id`); the stub arena
// space they use is appended to `release`. A failed Status is a protocol
// violation: an input outside the stub's arenas, or inputs adding up to
// more than stub-max-arena-bytes (as much as the stub may map at all,
// which also keeps the sum from wrapping; several inputs may name the
// same arena bytes).
Status PlanBlsInputs(
    uint64_t call_id, const proto::Request& q, const PeerArenas& peers,
    std::vector<proto::ArenaRef>* release, BlsInputPlan* plan);

// Copies the planned inputs into `copy` (plan.total bytes, sized by the
// caller) and sets data[i] to input i's bytes there.
void CopyBlsInputs(
    const proto::Request& q, const BlsInputPlan& plan, uint8_t* copy,
    std::vector<const uint8_t*>* data);

// Fills `req` from the wire request: id, correlation id, flags, timeout,
// parameters, inputs and requested outputs. Input i's bytes are data[i],
// which must outlive the request.
Status BuildBlsRequest(
    TRITONSERVER_InferenceRequest* req, const proto::Request& q,
    const std::vector<const uint8_t*>& data);

}  // namespace tritonpy
