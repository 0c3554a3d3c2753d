// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The Triton calls behind BLS_REQUEST and MODEL_CONTROL frames, without
// the call bookkeeping of bls.h: both run on the reader thread (requests)
// or a short-lived worker (model control) and keep nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "json.h"
#include "protocol.h"
#include "tritonpy/triton_infer_api.h"

namespace tritonpy {

// Fills `req` from the wire request: id, correlation id, flags, timeout,
// parameters, inputs and requested outputs. Input i's bytes are data[i],
// which must outlive the request.
Status BuildBlsRequest(
    TRITONSERVER_InferenceRequest* req, const proto::Request& q,
    const std::vector<const uint8_t*>& data);

// Runs one MODEL_CONTROL operation ("load", "unload", "is_ready") and
// returns the MODEL_CONTROL_DONE body: {"ok", "error", "ready"}.
json::Value RunModelControl(
    TRITONSERVER_Server* server, const json::Value& msg);

}  // namespace tritonpy
