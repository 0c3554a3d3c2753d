// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Turning stub output into Triton responses: RESPONSES frames, and error
// responses for requests that fail without reaching the model.
#pragma once

#include <string>
#include <vector>

#include "arena.h"
#include "batch.h"
#include "error.h"
#include "protocol.h"

namespace tritonpy {

// Sends the final error response of `req` (if it has none yet).
void RespondWithError(BatchRequest* req, const Status& status);

// Sends one Triton response per entry of `body` (a RESPONSES frame of
// `batch`), copying outputs from inline bytes or the stub's arenas.
// Appends every stub arena reference it read to `to_release`.
// Fails only on a protocol violation (bad request index, arena reference
// outside an arena), in which case no response has been sent; problems of
// one request (output size mismatch, Triton errors) fail that request.
Status WriteResponses(const std::string& model_name, Batch* batch,
                      const proto::ResponsesBody& body,
                      const PeerArenas& peers,
                      std::vector<proto::ArenaRef>* to_release);

}  // namespace tritonpy
