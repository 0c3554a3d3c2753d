// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/stub_starter.h"

#include <chrono>
#include <utility>

#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"
#include "util/clock.h"
#include "util/json.h"

namespace tritonpy {

namespace {

// Poll slice while waiting for the stub, so that finalize is noticed.
constexpr int kSliceMs = 100;

}  // namespace

StubStarter::StubStarter(
    ModelState* model, std::string name, std::string kind, int32_t device_id,
    std::string describe, StubFrames* frames, Bls* bls,
    LogLevelSync* log_levels, StubSupervisor* stub, std::vector<uint8_t>* buf)
    : model_(model),
      name_(std::move(name)),
      kind_(std::move(kind)),
      device_id_(device_id),
      describe_(std::move(describe)),
      frames_(frames),
      bls_(bls),
      log_levels_(log_levels),
      stub_(stub),
      buf_(buf)
{
}

Status
StubStarter::Start(
    std::unique_ptr<StubProcess>* process, std::shared_ptr<Channel>* channel,
    StubTraits* traits)
{
  // The model's first instance gets the stub that ran auto_complete_config,
  // already past HELLO (docs/protocol.md): with instances starting in
  // parallel, the one whose name the stub's command line has.
  std::unique_ptr<StubProcess> proc;
  std::shared_ptr<Channel> ch;
  const bool greeted = model_->TakeAutoCompleteStub(name_, &proc, &ch);
  if (!greeted) {
    proc = std::make_unique<StubProcess>();
    int fd = -1;
    TRITONPY_RETURN_IF_ERROR(proc->Spawn(model_->stub_launch(), name_, &fd));
    ch = std::make_shared<Channel>(
        fd, model_->backend().settings().stub_send_queue_bytes);
  }
  Status s = Handshake(proc.get(), ch, greeted, traits);
  if (!s.ok()) {
    // EOF lets a healthy stub exit by itself; then it is killed.
    ch->Shutdown();
    const std::string how = proc->EndWithin(2000);
    if (!how.empty()) {
      s = Status::Error(s.code(), s.message() + "; the stub " + how);
    }
    frames_->Clear();  // what a failed initialize() created
    return s;
  }
  *process = std::move(proc);
  *channel = std::move(ch);
  return Status();
}

Status
StubStarter::Handshake(
    StubProcess* process, const std::shared_ptr<Channel>& channel, bool greeted,
    StubTraits* traits)
{
  const BackendSettings& settings = model_->backend().settings();
  std::string text;
  Status s;
  if (!greeted) {
    s = AwaitJson(
        channel, proto::FrameType::kHello, settings.stub_timeout_seconds * 1000,
        &text);
    if (s.ok()) s = proto::CheckHello(text);
    if (!s.ok()) return Status::Unavailable(StartFailure(process, s.message()));
  }

  json::Value args = json::Value::object();
  args["model_config"] = model_->config_json();
  args["model_instance_kind"] = kind_;
  args["model_instance_name"] = name_;
  args["model_instance_device_id"] = std::to_string(device_id_);
  args["model_repository"] = model_->repository();
  args["model_version"] = std::to_string(model_->version());
  args["model_name"] = model_->name();
  json::Value stub_settings = json::Value::object();
  stub_settings["decoupled"] = model_->decoupled();
  stub_settings["finalize_grace_seconds"] = settings.finalize_grace_seconds;
  stub_settings["python_logging"] = settings.python_logging;
  // With an execute timeout the backend must see each sync batch end as it
  // does: the stub then answers every batch at once.
  stub_settings["execute_timeout_seconds"] = model_->execute_timeout_seconds();
  // So that the stub fails an allocation past them instead of being killed.
  stub_settings["stub_max_arenas"] = settings.stub_limits.max_arenas;
  stub_settings["stub_max_arena_bytes"] = settings.stub_limits.max_arena_bytes;
  // The largest frame body the stub may place in an arena: texts past it
  // are cut (docs/protocol.md, "Text").
  stub_settings["stub_max_body_bytes"] = settings.stub_limits.max_body_bytes;
  json::Value init = json::Value::object();
  init["args"] = std::move(args);
  init["model_file"] = model_->model_file();
  init["model_dir"] = model_->model_dir();
  init["settings"] = std::move(stub_settings);
  std::string init_text = json::Write(init);
  if (init_text.size() > proto::kMaxJsonText) {
    return Status::InvalidArg(
        "tritonpy: " + describe_ + ": the model config is too large for " +
        "an INIT frame");
  }
  const proto::Frame frame = proto::InitFrame(init_text);
  // A new stub knows nothing of the log settings: they go before INIT.
  log_levels_->Reset();
  log_levels_->Sync(channel.get());
  TRITONPY_RETURN_IF_ERROR(channel->Send(frame));

  // The model's initialize() may take long: no deadline, EOF ends the wait.
  s = AwaitJson(channel, proto::FrameType::kInitDone, -1, &text);
  if (!s.ok()) {
    // The official backend's words first: scripts grep the log for them.
    return Status::Unavailable(
        "Stub process '" + name_ + "' is not healthy. tritonpy: " + describe_ +
        ": stub failed during initialize: " + s.message());
  }
  json::Value done;
  s = json::Parse(text, &done);
  if (!s.ok()) return s.WithPrefix("tritonpy: INIT_DONE: ");
  if (!json::GetBool(done, "ok")) {
    std::string error = json::GetString(done, "error");
    if (error.empty()) {
      error = "tritonpy: " + describe_ + ": initialize failed";
    }
    return Status::Internal(error);
  }
  std::string mode = json::GetString(done, "execute", "sync");
  if (mode != "sync" && mode != "async") {
    return Status::InvalidArg(
        "tritonpy: " + describe_ + ": INIT_DONE has an unknown execute " +
        "mode '" + mode + "'");
  }
  traits->async_execute = mode == "async";
  traits->has_is_ready = json::GetBool(done, "is_ready");
  return Status();
}

Status
StubStarter::AwaitJson(
    const std::shared_ptr<Channel>& channel, proto::FrameType want,
    int timeout_ms, std::string* json)
{
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const char* want_name = proto::FrameTypeName(want);
  while (true) {
    size_t len = 0;
    std::vector<int> fds;
    Status err;
    auto r = channel->Receive(buf_, &len, &fds, kSliceMs, &err);
    if (r == Channel::RecvResult::kTimeout) {
      if (stub_->stopping()) {
        return Status::Unavailable("the instance is being finalized");
      }
      if (timeout_ms >= 0 && Clock::now() >= deadline) {
        return Status::Unavailable(
            "no " + std::string(want_name) + " within " +
            std::to_string(timeout_ms / 1000) + " s (stub-timeout-seconds)");
      }
      continue;
    }
    if (r == Channel::RecvResult::kEof) {
      const std::string gave_up = channel->send_failure();
      if (!gave_up.empty()) {
        return Status::Unavailable(
            "the stub was given up on before sending " +
            std::string(want_name) + ": " + gave_up);
      }
      return Status::Unavailable(
          "the stub closed its socket before sending " +
          std::string(want_name));
    }
    if (r == Channel::RecvResult::kError) {
      CloseAll(&fds);
      SendError(channel.get(), err.message());
      return err;
    }
    proto::FrameView f;
    Status s = proto::DecodeHeader(buf_->data(), len, &f);
    const uint8_t* body = nullptr;
    if (s.ok() && f.type != proto::FrameType::kArena && !fds.empty()) {
      s = Violation(
          std::string("a ") + proto::FrameTypeName(f.type) +
          " frame carried file descriptors");
    }
    if (s.ok()) s = frames_->ResolveBody(f, &body);
    bool handled = false;
    if (s.ok() && f.type == want) {
      proto::DecodeJson(body, f.body_len, json);
      frames_->ReleaseBody(f, channel.get());
      return Status();
    }
    if (s.ok())
      s = frames_->HandleCommon(f, body, &fds, channel.get(), &handled);
    if (s.ok() && !handled && f.type == proto::FrameType::kModelControl) {
      // pb_utils.load_model() and friends from initialize(): answered by a
      // worker thread, as during execute.
      std::vector<proto::ArenaRef> release;
      if (f.body_in_arena) release.push_back(f.body_ref);
      // No request is open yet: a call made now continues no trace.
      s = bls_->OnFrame(
          f, body, frames_->peers(), channel, &release,
          [](uint64_t, uint32_t) -> TRITONSERVER_InferenceTrace* {
            return nullptr;
          });
      if (s.ok() && !release.empty()) SendRelease(channel.get(), release);
      handled = true;
    }
    CloseAll(&fds);
    if (s.ok() && !handled) {
      s = Violation(
          std::string("unexpected ") + proto::FrameTypeName(f.type) +
          " frame while waiting for " + want_name);
    }
    if (!s.ok()) {
      SendError(channel.get(), s.message());
      return s;
    }
  }
}

std::string
StubStarter::StartFailure(StubProcess* process, const std::string& why)
{
  const std::string& python = model_->stub_launch().python;
  std::string msg = "tritonpy: " + describe_ + ": `" + python +
                    " -m tritonpy.stub` could not start (interpreter '" +
                    python + "'";
  if (process->executable() != python) {
    msg += " found at '" + process->executable() + "'";
  }
  msg += "): " + why;
  const std::string how = process->EndWithin(1000);
  if (!how.empty()) msg += "; the stub " + how;
  return msg;
}

}  // namespace tritonpy
