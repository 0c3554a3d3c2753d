// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The constants of the IPC protocol (docs/protocol.md), generated from
// docs/protocol.toml by tools/gen_wire.py (make wire): do not edit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tritonpy {
namespace proto {

constexpr uint32_t kMagic = 0x31595054;
constexpr uint8_t kVersion = 1;

// The header's fields, at these offsets (all little-endian).
constexpr size_t kHeaderMagicOffset = 0;      // u32
constexpr size_t kHeaderVersionOffset = 4;    // u8
constexpr size_t kHeaderTypeOffset = 5;       // u8
constexpr size_t kHeaderFlagsOffset = 6;      // u16
constexpr size_t kHeaderIdOffset = 8;         // u64
constexpr size_t kHeaderBodyLenOffset = 16;   // u32
constexpr size_t kHeaderReservedOffset = 20;  // u32
constexpr size_t kHeaderSize = 24;

// bytes of a frame, header included
constexpr size_t kMaxFrame = 131072;

// bytes of an arena reference (`u32 arena_id, u32 reserved, u64 offset`)
constexpr size_t kArenaRefSize = 16;

// bytes of a tensor's data sent inline while the frame fits (sender policy)
constexpr size_t kMaxInlineTensor = 65536;

// dimensions of a tensor
constexpr uint32_t kMaxNdim = 64;

// items in any one list of a body (requests, responses, tensors, names, release
// entries, metric ops, labels, values)
constexpr uint32_t kMaxCount = 1048576;

// bytes of a text the backend sends the stub, the marker included
constexpr size_t kMaxBackendText = 32768;

// a text cut to fit ends with this, its whole length in UTF-8 bytes, then
// `TRUNCATED_END`
constexpr char kTruncatedMarkerStart[] = "... [truncated, ";

// the end of the marker of a cut text
constexpr char kTruncatedMarkerEnd[] = " bytes]";

// Header flags.
constexpr uint16_t kFlagBodyInArena = 1;
constexpr uint16_t kFlagBatchDone = 2;

enum class FrameType : uint8_t {
  kHello = 1,
  kInit = 2,
  kInitDone = 3,
  kArena = 4,
  kExecute = 5,
  kResponses = 6,
  kExecuteDone = 7,
  kLog = 8,
  kFinalize = 9,
  kFinalizeDone = 10,
  kError = 11,
  kRelease = 12,
  kCancel = 13,
  kSendError = 14,
  kIsReady = 15,
  kReady = 16,
  kDrain = 17,
  kBlsRequest = 18,
  kBlsResponse = 19,
  kBlsCancel = 20,
  kBlsArena = 21,
  kBlsRelease = 22,
  kModelControl = 23,
  kModelControlDone = 24,
  kMetric = 25,
  kMetricDone = 26,
  kAutoComplete = 27,
  kAutoCompleteDone = 28,
  kLogLevels = 29,
};
constexpr uint8_t kMaxFrameType = 29;
// FrameTypeName: by type value.
constexpr const char* kFrameTypeNames[kMaxFrameType + 1] = {
    "UNKNOWN",
    "HELLO",
    "INIT",
    "INIT_DONE",
    "ARENA",
    "EXECUTE",
    "RESPONSES",
    "EXECUTE_DONE",
    "LOG",
    "FINALIZE",
    "FINALIZE_DONE",
    "ERROR",
    "RELEASE",
    "CANCEL",
    "SEND_ERROR",
    "IS_READY",
    "READY",
    "DRAIN",
    "BLS_REQUEST",
    "BLS_RESPONSE",
    "BLS_CANCEL",
    "BLS_ARENA",
    "BLS_RELEASE",
    "MODEL_CONTROL",
    "MODEL_CONTROL_DONE",
    "METRIC",
    "METRIC_DONE",
    "AUTO_COMPLETE",
    "AUTO_COMPLETE_DONE",
    "LOG_LEVELS",
};
// IsJsonFrame: bit t set when frame type t has a JSON body.
constexpr uint32_t kJsonFrameTypes = 0x1980040E;

// RESPONSES entry flags (response_flags).
// the request's last response (`TRITONSERVER_RESPONSE_COMPLETE_FINAL`)
constexpr uint32_t kRespFinal = 0x1u;
// after this entry, the entry's batch is over
constexpr uint32_t kRespBatchEnd = 0x20000000u;
// complete the request without `FINAL`: Triton executes it again
constexpr uint32_t kRespReschedule = 0x40000000u;
// the entry carries flags only
constexpr uint32_t kRespNoResponse = 0x80000000u;
constexpr uint32_t kRespKnownFlags = 0xE0000001u;

// Tensor data locations.
// in the frame, after `pad8`
constexpr uint8_t kLocationInline = 0;
// in an arena owned by the frame's sender
constexpr uint8_t kLocationArena = 1;
// in an arena owned by the frame's receiver (RESPONSES outputs only)
constexpr uint8_t kLocationReceiverArena = 2;

// METRIC operations.
enum class MetricOpCode : uint8_t {
  kFamilyNew = 1,
  kFamilyDelete = 2,
  kMetricNew = 3,
  kMetricDelete = 4,
  kIncrement = 5,
  kSet = 6,
  kObserve = 7,
  kValue = 8,
};
constexpr uint32_t kMaxMetricKind = 2;

// LOG_LEVELS: bit n set = TRITONSERVER_LogLevel n is enabled.
constexpr uint32_t kLogLevelsAll = 0xF;

}  // namespace proto
}  // namespace tritonpy
