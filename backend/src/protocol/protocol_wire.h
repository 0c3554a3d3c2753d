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

// inline tensor data starts at a multiple of this many bytes from the frame's
// start (`pad8`)
constexpr size_t kPadAlign = 8;

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
  kBlsChannel = 30,
};
constexpr uint8_t kMaxFrameType = 30;
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
    "BLS_CHANNEL",
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

// Record layouts (the records of docs/protocol.toml): type widths, then per
// record the offsets of its fields at fixed positions, its size when fixed, its
// smallest encoding (min size) and, per union case, the record's smallest
// encoding with that case.
constexpr size_t kU8Size = 1;
constexpr size_t kU16Size = 2;
constexpr size_t kU32Size = 4;
constexpr size_t kU64Size = 8;
constexpr size_t kI64Size = 8;
constexpr size_t kF64Size = 8;
constexpr size_t kLengthSize = 4;
constexpr size_t kArenaRefArenaIdOffset = 0;
constexpr size_t kArenaRefReservedOffset = 4;
constexpr size_t kArenaRefOffsetOffset = 8;
constexpr size_t kArenaRefMinSize = 16;
constexpr size_t kTensorNameOffset = 0;
constexpr size_t kTensorMinSize = 21;
constexpr size_t kRequestRequestIdOffset = 0;
constexpr size_t kRequestMinSize = 45;
constexpr size_t kResponseResponseFlagsOffset = 0;
constexpr size_t kResponseHasErrorOffset = 4;
constexpr size_t kResponseErrorCodeOffset = 5;
constexpr size_t kResponseErrorMessageOffset = 9;
constexpr size_t kResponseMinSize = 21;
constexpr size_t kResponseEntryBatchIdOffset = 0;
constexpr size_t kResponseEntryRequestIndexOffset = 8;
constexpr size_t kResponseEntryResponseOffset = 12;
constexpr size_t kResponseEntryMinSize = 33;
constexpr size_t kCancelEntryBatchIdOffset = 0;
constexpr size_t kCancelEntryRequestIndexOffset = 8;
constexpr size_t kCancelEntryReservedOffset = 12;
constexpr size_t kCancelEntrySize = 16;
constexpr size_t kCancelEntryMinSize = 16;
constexpr size_t kAllocationRefOffset = 0;
constexpr size_t kAllocationSize = 16;
constexpr size_t kAllocationMinSize = 16;
constexpr size_t kLabelKeyOffset = 0;
constexpr size_t kLabelMinSize = 8;
constexpr size_t kMetricOpOpOffset = 0;
constexpr size_t kMetricOpArgsOffset = 1;
constexpr size_t kMetricOpMinSize = 5;
constexpr size_t kMetricOpFamilyNewMinSize = 17;
constexpr size_t kMetricOpFamilyDeleteMinSize = 5;
constexpr size_t kMetricOpMetricNewMinSize = 17;
constexpr size_t kMetricOpMetricDeleteMinSize = 5;
constexpr size_t kMetricOpIncrementMinSize = 13;
constexpr size_t kMetricOpSetMinSize = 13;
constexpr size_t kMetricOpObserveMinSize = 9;
constexpr size_t kMetricOpValueMinSize = 5;
constexpr size_t kOpFamilyNewFamilyOffset = 0;
constexpr size_t kOpFamilyNewKindOffset = 4;
constexpr size_t kOpFamilyNewNameOffset = 8;
constexpr size_t kOpFamilyNewMinSize = 16;
constexpr size_t kOpFamilyFamilyOffset = 0;
constexpr size_t kOpFamilySize = 4;
constexpr size_t kOpFamilyMinSize = 4;
constexpr size_t kOpMetricNewMetricOffset = 0;
constexpr size_t kOpMetricNewFamilyOffset = 4;
constexpr size_t kOpMetricNewLabelsOffset = 8;
constexpr size_t kOpMetricNewMinSize = 16;
constexpr size_t kOpMetricMetricOffset = 0;
constexpr size_t kOpMetricSize = 4;
constexpr size_t kOpMetricMinSize = 4;
constexpr size_t kOpMetricValueMetricOffset = 0;
constexpr size_t kOpMetricValueValueOffset = 4;
constexpr size_t kOpMetricValueSize = 12;
constexpr size_t kOpMetricValueMinSize = 12;
constexpr size_t kOpObserveMetricOffset = 0;
constexpr size_t kOpObserveValuesOffset = 4;
constexpr size_t kOpObserveMinSize = 8;
constexpr size_t kEmptySize = 0;
constexpr size_t kEmptyMinSize = 0;
constexpr size_t kArenaArenaIdOffset = 0;
constexpr size_t kArenaReservedOffset = 4;
constexpr size_t kArenaSizeOffset = 8;
constexpr size_t kArenaSize = 16;
constexpr size_t kArenaMinSize = 16;
constexpr size_t kExecuteRequestsOffset = 0;
constexpr size_t kExecuteMinSize = 4;
constexpr size_t kResponsesResponsesOffset = 0;
constexpr size_t kResponsesMinSize = 4;
constexpr size_t kExecuteDoneOkOffset = 0;
constexpr size_t kExecuteDoneErrorOffset = 1;
constexpr size_t kExecuteDoneMinSize = 5;
constexpr size_t kLogLevelOffset = 0;
constexpr size_t kLogFileOffset = 4;
constexpr size_t kLogMinSize = 16;
constexpr size_t kErrorMessageOffset = 0;
constexpr size_t kErrorMinSize = 4;
constexpr size_t kReleaseAllocationsOffset = 0;
constexpr size_t kReleaseMinSize = 4;
constexpr size_t kCancelRequestsOffset = 0;
constexpr size_t kCancelMinSize = 4;
constexpr size_t kSendErrorBatchIdOffset = 0;
constexpr size_t kSendErrorRequestIndexOffset = 8;
constexpr size_t kSendErrorErrorCodeOffset = 12;
constexpr size_t kSendErrorMessageOffset = 16;
constexpr size_t kSendErrorMinSize = 20;
constexpr size_t kReadyReadyOffset = 0;
constexpr size_t kReadyMessageOffset = 1;
constexpr size_t kReadyMinSize = 5;
constexpr size_t kBlsRequestModelNameOffset = 0;
constexpr size_t kBlsRequestMinSize = 69;
constexpr size_t kBlsResponseResponseOffset = 0;
constexpr size_t kBlsResponseMinSize = 21;
constexpr size_t kMetricOpsOffset = 0;
constexpr size_t kMetricMinSize = 4;
constexpr size_t kMetricDoneOkOffset = 0;
constexpr size_t kMetricDoneErrorOffset = 1;
constexpr size_t kMetricDoneMinSize = 13;
constexpr size_t kLogLevelsEnabledOffset = 0;
constexpr size_t kLogLevelsSize = 4;
constexpr size_t kLogLevelsMinSize = 4;

}  // namespace proto
}  // namespace tritonpy
