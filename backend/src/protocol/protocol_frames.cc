// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "protocol/protocol_frames.h"

namespace tritonpy {
namespace proto {

namespace {

Frame
JsonFrame(FrameType type, uint64_t id, const std::string& json)
{
  return MakeFrame(type, 0, id, [&](Frame* out) { EncodeJson(json, out); });
}

Frame
EmptyFrame(FrameType type, uint64_t id)
{
  return MakeFrame(type, 0, id, [](Frame*) {});
}

}  // namespace

Frame
InitFrame(const std::string& json)
{
  return JsonFrame(FrameType::kInit, 0, json);
}

Frame
AutoCompleteFrame(const std::string& json)
{
  return JsonFrame(FrameType::kAutoComplete, 0, json);
}

Frame
ModelControlDoneFrame(uint64_t id, const std::string& json)
{
  return JsonFrame(FrameType::kModelControlDone, id, json);
}

Frame
FinalizeFrame()
{
  return EmptyFrame(FrameType::kFinalize, 0);
}

Frame
DrainFrame()
{
  return EmptyFrame(FrameType::kDrain, 0);
}

Frame
IsReadyFrame(uint64_t query_id)
{
  return EmptyFrame(FrameType::kIsReady, query_id);
}

Frame
ArenaFrame(const ArenaBody& arena)
{
  return MakeFrame(
      FrameType::kArena, 0, 0, [&](Frame* out) { EncodeArena(arena, out); });
}

Frame
BlsArenaFrame(const ArenaBody& arena)
{
  return MakeFrame(
      FrameType::kBlsArena, 0, 0, [&](Frame* out) { EncodeArena(arena, out); });
}

void
ExecuteFrame(uint64_t batch_id, const ExecuteBody& body, Frame* frame)
{
  BeginFrame(frame);
  EncodeExecute(body, frame);
  FinishFrame(FrameType::kExecute, 0, batch_id, frame);
}

Frame
ExecuteRefFrame(uint64_t batch_id, uint32_t body_len, const ArenaRef& ref)
{
  return EncodeBodyRefFrame(FrameType::kExecute, 0, batch_id, body_len, ref);
}

Frame
CancelFrame(const CancelBody& body)
{
  return MakeFrame(
      FrameType::kCancel, 0, 0, [&](Frame* out) { EncodeCancel(body, out); });
}

Frame
SendErrorFrame(const SendErrorBody& body)
{
  return MakeFrame(FrameType::kSendError, 0, 0, [&](Frame* out) {
    EncodeSendError(body, out);
  });
}

Frame
ReleaseFrame(const ReleaseBody& body)
{
  return MakeFrame(
      FrameType::kRelease, 0, 0, [&](Frame* out) { EncodeRelease(body, out); });
}

Frame
LogLevelsFrame(uint32_t enabled)
{
  return MakeFrame(FrameType::kLogLevels, 0, 0, [&](Frame* out) {
    EncodeLogLevels({enabled}, out);
  });
}

Frame
ErrorFrame(const std::string& message)
{
  return MakeFrame(FrameType::kError, 0, 0, [&](Frame* out) {
    EncodeError({ClipText(message)}, out);
  });
}

Frame
BlsResponseFrame(uint64_t call_id, const BlsResponseBody& body)
{
  return MakeFrame(FrameType::kBlsResponse, 0, call_id, [&](Frame* out) {
    EncodeBlsResponse(body, out);
  });
}

Frame
MetricDoneFrame(uint64_t id, const MetricDoneBody& body)
{
  return MakeFrame(FrameType::kMetricDone, 0, id, [&](Frame* out) {
    EncodeMetricDone(body, out);
  });
}

}  // namespace proto
}  // namespace tritonpy
