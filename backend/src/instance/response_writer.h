// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Turning stub output into Triton responses: RESPONSES frames, and error
// responses for requests that fail without reaching the model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "instance/batch.h"
#include "ipc/arena.h"
#include "protocol/protocol.h"
#include "triton_c_api/triton_api.h"
#include "util/error.h"

namespace tritonpy {

// Sends one error response of `req` with `flags` (through its factory in
// decoupled mode). A failure of TRITONBACKEND_ResponseSend is returned in
// *send_error when given, else logged.
void SendErrorResponse(
    BatchRequest* req, const Status& status, uint32_t flags,
    Status* send_error = nullptr);

// Sends the final error response of `req` (if it has none yet).
void RespondWithError(BatchRequest* req, const Status& status);

// Ends `req`, the last thing the backend does with a request, on every
// path: reports its statistics (success unless a response carried an
// error; compute from batch.compute_start_ns, or from now for a batch that
// never reached the stub, to now), releases it with `release_flags`,
// deletes its response factory and marks it complete. A failed reschedule
// answers with the error and releases for good: a request is never leaked
// nor its client left waiting. The caller updates its own counters.
void FinishRequest(
    TRITONBACKEND_ModelInstance* instance, const std::string& model_name,
    const Batch& batch, BatchRequest* req, uint32_t release_flags);

// Reports the statistics of `batch` as one execution that ended at
// `exec_end_ns` (compute ends when execute returned, or then).
void ReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, const Batch& batch,
    uint64_t exec_end_ns);

// Resolves the output bytes of every entry of a RESPONSES body: inline
// data, the stub's arenas, or (location 2) backend arena space of the
// entry's own batch, owners[i] (alive until that batch ends, which needs
// the entry's request complete: after the entry is written).
// (*data)[i][j] is output j of entry i. Appends every stub arena reference
// to `to_release`. Fails (a protocol violation) on a reference outside the
// stub's arenas or outside the batch's allocations; then nothing was sent.
Status ResolveOutputs(
    const proto::ResponsesBody& body, const PeerArenas& peers,
    const std::vector<std::shared_ptr<Batch>>& owners,
    std::vector<std::vector<const uint8_t*>>* data,
    std::vector<proto::ArenaRef>* to_release);

// What one RESPONSES entry did to its request.
enum class EntryOutcome {
  kOpen,        // the request stays open (decoupled, non-final response)
  kComplete,    // release with TRITONSERVER_REQUEST_RELEASE_ALL
  kReschedule,  // release with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
};

// Turns one entry for the open request `req` into Triton calls:
//  - default mode: RESCHEDULE releases the request for another execution
//    and sends no response (any response it carries is dropped); the
//    request's one response is sent with its FINAL flag, or, sent without
//    it, is held until NO_RESPONSE+FINAL sends it with the flag (never a
//    flags-only final: Triton 2.51's frontends crash on one for a
//    non-decoupled model); NO_RESPONSE before any response is an error
//    response. (The stub sends one response, or errors, per request.)
//  - decoupled mode: a response (unless NO_RESPONSE) is sent with FINAL
//    when the entry has FINAL and not RESCHEDULE; NO_RESPONSE+FINAL sends
//    the FINAL flag alone; RESCHEDULE releases for another execution.
// Problems of the request itself (output size mismatch, Triton errors)
// become an error response. A failed TRITONBACKEND_ResponseSend (or
// SendFlags) is returned in *send_error, for a SEND_ERROR frame.
EntryOutcome WriteEntry(
    const std::string& model_name, bool decoupled, BatchRequest* req,
    const proto::Response& entry, const std::vector<const uint8_t*>& data,
    Status* send_error);

}  // namespace tritonpy
