// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The frames the backend sends the stub, one builder per kind: the only
// place outside the codec (protocol.h) where a frame is put together, as
// the stub's are in its one Outbound. Header fields a kind fixes (its
// type, flags, an id it has none of) are set here, so that a caller names
// only what varies. docs/protocol.md specifies each body.
//
// Each returns the whole frame. None checks kMaxFrame: a caller that may
// exceed it (JSON texts, BLS responses, EXECUTE) checks the result's size,
// or the text's before it (MaxJsonText).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/protocol.h"

namespace tritonpy {
namespace proto {

using Frame = std::vector<uint8_t>;

// The longest JSON text a JSON frame (INIT, AUTO_COMPLETE, ...) holds.
constexpr size_t kMaxJsonText = kMaxFrame - kHeaderSize;

// JSON bodies.
Frame InitFrame(const std::string& json);
Frame AutoCompleteFrame(const std::string& json);
Frame ModelControlDoneFrame(uint64_t id, const std::string& json);

// Empty bodies.
Frame FinalizeFrame();
Frame DrainFrame();
Frame IsReadyFrame(uint64_t query_id);

// A new arena of the backend's, sent with its memfd: for EXECUTE's
// inputs (ARENA) or a BLS call's outputs (BLS_ARENA).
Frame ArenaFrame(const ArenaBody& arena);
Frame BlsArenaFrame(const ArenaBody& arena);

// EXECUTE of batch `batch_id`, written into *frame (its capacity is
// reused). ExecuteRefFrame: the same batch whose body of `body_len` bytes
// lies in an arena at `ref` (BODY_IN_ARENA).
void ExecuteFrame(uint64_t batch_id, const ExecuteBody& body, Frame* frame);
Frame ExecuteRefFrame(
    uint64_t batch_id, uint32_t body_len, const ArenaRef& ref);

Frame CancelFrame(const CancelBody& body);
Frame SendErrorFrame(const SendErrorBody& body);
Frame ReleaseFrame(const ReleaseBody& body);
Frame LogLevelsFrame(uint32_t enabled);
// ERROR: `message` clipped to kMaxBackendText (ClipText).
Frame ErrorFrame(const std::string& message);
// One response of BLS call `call_id`.
Frame BlsResponseFrame(uint64_t call_id, const BlsResponseBody& body);
// The answer to METRIC request `id`.
Frame MetricDoneFrame(uint64_t id, const MetricDoneBody& body);

}  // namespace proto
}  // namespace tritonpy
