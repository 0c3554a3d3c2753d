// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "model/auto_complete.h"

#include <unistd.h>

#include <chrono>
#include <vector>

#include "protocol/protocol.h"
#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"
#include "util/json.h"

namespace tritonpy {

namespace {

using Clock = std::chrono::steady_clock;

// Waits for the JSON frame `want`, logging the stub's LOG and ERROR frames
// meanwhile; the stub sends nothing else before INIT. timeout_ms < 0: until
// the frame comes or the stub goes.
Status
AwaitJson(
    Channel* channel, proto::FrameType want, int timeout_ms, std::string* json)
{
  const char* want_name = proto::FrameTypeName(want);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<uint8_t> buf;
  while (true) {
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      wait_ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(
              deadline - Clock::now())
              .count());
      if (wait_ms <= 0) {
        return Status::Unavailable(
            std::string("no ") + want_name + " within " +
            std::to_string(timeout_ms / 1000) + " s (stub-timeout-seconds)");
      }
    }
    size_t len = 0;
    std::vector<int> fds;
    Status err;
    Channel::RecvResult r = channel->Receive(&buf, &len, &fds, wait_ms, &err);
    for (int fd : fds) close(fd);
    if (r == Channel::RecvResult::kTimeout) continue;
    if (r == Channel::RecvResult::kEof) {
      return Status::Unavailable(
          std::string("the stub closed its socket before sending ") +
          want_name);
    }
    if (r == Channel::RecvResult::kError) return err;
    proto::FrameView f;
    TRITONPY_RETURN_IF_ERROR(proto::DecodeHeader(buf.data(), len, &f));
    if (!fds.empty() || f.body_in_arena) {
      return Status::InvalidArg(
          std::string("tritonpy protocol violation: a ") +
          proto::FrameTypeName(f.type) +
          " frame before INIT carried descriptors or an arena body");
    }
    if (f.type == want) return proto::DecodeJson(f.body, f.body_len, json);
    if (f.type == proto::FrameType::kLog) {
      proto::LogBody log;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeLog(f.body, f.body_len, &log));
      LogAt(
          log.level <= 3 ? static_cast<TRITONSERVER_LogLevel>(log.level)
                         : TRITONSERVER_LOG_INFO,
          log.file.c_str(), static_cast<int>(log.line), log.message);
      continue;
    }
    if (f.type == proto::FrameType::kError) {
      proto::ErrorBody e;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeError(f.body, f.body_len, &e));
      return Status::Internal("the stub reported: " + e.message);
    }
    return Status::InvalidArg(
        std::string("tritonpy protocol violation: unexpected ") +
        proto::FrameTypeName(f.type) + " frame while waiting for " + want_name +
        " (auto_complete_config may not use BLS or metrics)");
  }
}

}  // namespace

Status
RunAutoComplete(
    const AutoCompleteCall& call, std::string* completed, StartedStub* stub)
{
  const std::string prefix = "tritonpy: model '" + call.model_name + "': ";
  StartedStub s;
  s.process = std::make_unique<StubProcess>();
  int fd = -1;
  TRITONPY_RETURN_IF_ERROR(
      s.process->Spawn(call.launch, call.instance_name, &fd)
          .WithPrefix(prefix + "auto-complete: "));
  s.channel = std::make_shared<Channel>(fd, call.stub_send_queue_bytes);

  std::string text;
  Status st = AwaitJson(
      s.channel.get(), proto::FrameType::kHello,
      call.stub_timeout_seconds * 1000, &text);
  if (st.ok()) st = proto::CheckHello(text);
  if (st.ok()) {
    // What auto_complete_config logs obeys Triton's settings.
    st = s.channel->Send(proto::LogLevelsFrame(EnabledLogLevels()));
  }
  if (st.ok()) {
    const json::Value msg = {
        {"model_name", call.model_name},
        {"config", call.config_json},
        {"model_file", call.model_file},
        {"model_dir", call.model_dir},
        {"settings", {{"python_logging", call.python_logging}}}};
    std::string body = json::Write(msg);
    if (body.size() > proto::kMaxJsonText) {
      st = Status::InvalidArg("the model config is too large for a frame");
    } else {
      st = s.channel->Send(proto::AutoCompleteFrame(body));
    }
  }
  if (st.ok()) {
    st = AwaitJson(
        s.channel.get(), proto::FrameType::kAutoCompleteDone, -1, &text);
  }
  json::Value done;
  if (st.ok()) st = json::Parse(text, &done);
  if (st.ok() && !json::GetBool(done, "ok")) {
    // The model's own failure: the stub's message names the model and
    // carries the traceback.
    StopStub(&s);
    std::string error = json::GetString(done, "error");
    return Status::InvalidArg(
        error.empty() ? prefix + "auto_complete_config failed" : error);
  }
  if (!st.ok()) {
    std::string how = StopStub(&s);
    return Status::Error(
        st.code(), prefix + "the stub running auto_complete_config (`" +
                       call.launch.python + " -m tritonpy.stub`) failed: " +
                       st.message() + (how.empty() ? "" : "; the stub " + how));
  }
  *completed = json::GetString(done, "config");
  *stub = std::move(s);
  return Status();
}

Status
ApplyCompletedConfig(
    TRITONBACKEND_Model* model, const std::string& model_name,
    const std::string& config_json)
{
  TRITONSERVER_Message* message = nullptr;
  Status s = FromTriton(TRITONSERVER_MessageNewFromSerializedJson(
      &message, config_json.data(), config_json.size()));
  if (s.ok()) {
    s = FromTriton(TRITONBACKEND_ModelSetConfig(model, 1, message));
  }
  if (message != nullptr) {
    TRITONSERVER_Error* del = TRITONSERVER_MessageDelete(message);
    if (del != nullptr) TRITONSERVER_ErrorDelete(del);
  }
  return s.WithPrefix(
      "tritonpy: model '" + model_name +
      "': Triton refused the config completed by auto_complete_config: ");
}

std::string
StopStub(StartedStub* stub)
{
  if (stub->channel != nullptr) stub->channel->Shutdown();
  std::string how;
  if (stub->process != nullptr) how = stub->process->EndWithin(2000);
  stub->channel.reset();
  stub->process.reset();
  return how;
}

}  // namespace tritonpy
