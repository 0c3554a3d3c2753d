// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance_state.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>

#include "execute_builder.h"
#include "json.h"
#include "response_writer.h"
#include "triton_util.h"

namespace tritonpy {

namespace {

void
CloseAll(std::vector<int>* fds)
{
  for (int fd : *fds) close(fd);
  fds->clear();
}

// Poll slice while waiting for the stub, so that finalize is noticed.
constexpr int kSliceMs = 100;

}  // namespace

InstanceState::InstanceState(
    ModelState* model, TRITONBACKEND_ModelInstance* instance, std::string name,
    std::string kind, int32_t device_id)
    : model_(model),
      instance_(instance),
      name_(std::move(name)),
      kind_(std::move(kind)),
      device_id_(device_id),
      stub_(
          Describe(), model->backend().settings().stub_restart_limit,
          [this](
              std::unique_ptr<StubProcess>* process,
              std::shared_ptr<Channel>* channel, StubTraits* traits) {
            return StartStub(process, channel, traits);
          }),
      gate_(
          &stub_, model->max_inflight_batches(), model->sync_prefetch_batches(),
          2 * model->backend().settings().stub_timeout_seconds),
      arenas_(model->backend().settings().arena_byte_size),
      table_(model, instance, &stub_, &gate_, &arenas_)
{
  metrics_ = std::make_unique<InstanceMetrics>(
      &model->backend().metric_store(), "model '" + model->name() + "'");
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const char* debug = getenv("TRITONPY_DEBUG");
  debug_counters_ =
      debug != nullptr && debug[0] != '\0' && std::string(debug) != "0";
}

int
InstanceState::LogDebugCounters()
{
  uint64_t bls_calls = 0;
  uint64_t bls_bytes = 0;
  if (bls_ != nullptr) bls_->DebugCounters(&bls_calls, &bls_bytes);
  uint64_t arena_bytes;
  {
    MutexLock lock(&arenas_.mu);
    arena_bytes = arenas_.allocator.allocated_bytes();
  }
  const size_t pending = gate_.pending_count();
  // key=value pairs: Triton's log escapes quotes, so no JSON.
  std::string line = "batches_total=" + std::to_string(table_.adopted_total()) +
                     " batches=" + std::to_string(table_.size() + pending) +
                     " requests=" + std::to_string(table_.open_requests()) +
                     " arena_bytes=" + std::to_string(arena_bytes) +
                     " bls_calls=" + std::to_string(bls_calls) +
                     " bls_arena_bytes=" + std::to_string(bls_bytes);
  if (line == last_debug_line_) return -1;
  const auto now = Clock::now();
  const auto due = last_debug_log_ + std::chrono::milliseconds(kDebugPeriodMs);
  if (now < due) {
    return static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(due - now)
            .count() +
        1);
  }
  last_debug_line_ = line;
  last_debug_log_ = now;
  TRITONPY_LOG_INFO("tritonpy-debug backend " + Describe() + " idle: " + line);
  return -1;
}

std::string
InstanceState::Describe() const
{
  return "model '" + model_->name() + "' instance '" + name_ + "'";
}

Status
InstanceState::Create(
    ModelState* model, TRITONBACKEND_ModelInstance* instance,
    std::unique_ptr<InstanceState>* out)
{
  const char* name = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelInstanceName(instance, &name));
  TRITONSERVER_InstanceGroupKind kind;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelInstanceKind(instance, &kind));
  int32_t device_id = 0;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id));
  std::unique_ptr<InstanceState> state(new InstanceState(
      model, instance, name,
      kind == TRITONSERVER_INSTANCEGROUPKIND_GPU     ? "GPU"
      : kind == TRITONSERVER_INSTANCEGROUPKIND_MODEL ? "MODEL"
                                                     : "CPU",
      device_id));

  if (state->wake_fd_ < 0) {
    return Status::Internal("tritonpy: eventfd failed");
  }
  TRITONSERVER_Server* server = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelServer(model->triton_model(), &server));
  // Before the stub: initialize() may use the model loading API.
  state->bls_ = std::make_unique<Bls>(
      server, state->Describe(), model->backend().settings().arena_byte_size);
  TRITONPY_RETURN_IF_ERROR(state->stub_.Start());
  state->drain_->server = server;
  state->drain_->model_name = model->name();
  state->drain_->model_version = static_cast<int64_t>(model->version());
  model->backend().drain_watcher().Register(state->drain_);
  state->reader_ = std::thread(&InstanceState::ReaderLoop, state.get());
  *out = std::move(state);
  return Status();
}

InstanceState::~InstanceState()
{
  model_->backend().drain_watcher().Unregister(drain_.get());
  const BackendSettings& settings = model_->backend().settings();
  const auto wait = std::chrono::milliseconds(
      static_cast<int64_t>(
          1000 *
          (settings.finalize_grace_seconds + settings.stub_timeout_seconds)));
  const std::string wait_text =
      json::Value::Double(
          settings.finalize_grace_seconds + settings.stub_timeout_seconds)
          .Serialize();
  TRITONPY_LOG_INFO("tritonpy: stopping stub for " + Describe());
  stub_.Stop(
      wait, wait_text, std::chrono::seconds(settings.stub_timeout_seconds),
      [this](Channel* channel) {
        SyncLogLevels(channel);  // for what finalize() logs
      });
  if (reader_.joinable()) reader_.join();
  bls_.reset();      // cancels BLS calls still in flight
  metrics_.reset();  // deletes the stub's metrics from the server
  if (wake_fd_ >= 0) close(wake_fd_);
}

// ---------------------------------------------------------------- startup

std::string
InstanceState::StartFailure(StubProcess* process, const std::string& why)
{
  const std::string& python = model_->stub_launch().python;
  std::string msg = "tritonpy: " + Describe() + ": `" + python +
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

Status
InstanceState::AwaitJson(
    const std::shared_ptr<Channel>& channel, proto::FrameType want,
    int timeout_ms, std::string* json)
{
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const char* want_name = proto::FrameTypeName(want);
  while (true) {
    size_t len = 0;
    std::vector<int> fds;
    Status err;
    auto r = channel->Receive(&recv_buf_, &len, &fds, kSliceMs, &err);
    if (r == Channel::RecvResult::kTimeout) {
      if (stub_.stopping()) {
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
    Status s = proto::DecodeHeader(recv_buf_.data(), len, &f);
    const uint8_t* body = nullptr;
    if (s.ok() && f.type != proto::FrameType::kArena && !fds.empty()) {
      s = Violation(
          std::string("a ") + proto::FrameTypeName(f.type) +
          " frame carried file descriptors");
    }
    if (s.ok()) s = ResolveBody(f, &body);
    bool handled = false;
    if (s.ok() && f.type == want) {
      proto::DecodeJson(body, f.body_len, json);
      return Status();
    }
    if (s.ok()) s = HandleCommon(f, body, &fds, channel.get(), &handled);
    if (s.ok() && !handled && f.type == proto::FrameType::kModelControl) {
      // pb_utils.load_model() and friends from initialize(): answered by a
      // worker thread, as during execute.
      std::vector<proto::ArenaRef> release;
      if (f.body_in_arena) release.push_back(f.body_ref);
      // No request is open yet: a call made now continues no trace.
      s = bls_->OnFrame(
          f, body, peers_, channel, &release,
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

Status
InstanceState::Handshake(
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

  json::Value args = json::Value::Object();
  args.Set("model_config", json::Value::String(model_->config_json()));
  args.Set("model_instance_kind", json::Value::String(kind_));
  args.Set("model_instance_name", json::Value::String(name_));
  args.Set(
      "model_instance_device_id",
      json::Value::String(std::to_string(device_id_)));
  args.Set("model_repository", json::Value::String(model_->repository()));
  args.Set(
      "model_version", json::Value::String(std::to_string(model_->version())));
  args.Set("model_name", json::Value::String(model_->name()));
  json::Value stub_settings = json::Value::Object();
  stub_settings.Set("decoupled", json::Value::Bool(model_->decoupled()));
  stub_settings.Set(
      "finalize_grace_seconds",
      json::Value::Double(settings.finalize_grace_seconds));
  // With an execute timeout the backend must see each sync batch end as it
  // does: the stub then answers every batch at once.
  stub_settings.Set(
      "execute_timeout_seconds",
      json::Value::Double(model_->execute_timeout_seconds()));
  json::Value init = json::Value::Object();
  init.Set("args", std::move(args));
  init.Set("model_file", json::Value::String(model_->model_file()));
  init.Set("model_dir", json::Value::String(model_->model_dir()));
  init.Set("settings", std::move(stub_settings));
  std::string init_text = init.Serialize();
  if (init_text.size() > proto::kMaxFrame - proto::kHeaderSize) {
    return Status::InvalidArg(
        "tritonpy: " + Describe() + ": the model config is too large for " +
        "an INIT frame");
  }
  auto frame = proto::MakeFrame(
      proto::FrameType::kInit, 0, 0,
      [&](std::vector<uint8_t>* out) { proto::EncodeJson(init_text, out); });
  // A new stub knows nothing of the log settings: they go before INIT.
  log_levels_sent_.store(kLogLevelsUnsent);
  SyncLogLevels(channel.get());
  TRITONPY_RETURN_IF_ERROR(channel->Send(frame));

  // The model's initialize() may take long: no deadline, EOF ends the wait.
  s = AwaitJson(channel, proto::FrameType::kInitDone, -1, &text);
  if (!s.ok()) {
    // The official backend's words first: scripts grep the log for them.
    return Status::Unavailable(
        "Stub process '" + name_ + "' is not healthy. tritonpy: " + Describe() +
        ": stub failed during initialize: " + s.message());
  }
  json::Value done;
  s = json::Parse(text, &done);
  if (!s.ok()) return s.WithPrefix("tritonpy: INIT_DONE: ");
  if (!done.GetBool("ok", false)) {
    std::string error = done.GetString("error", "");
    if (error.empty()) {
      error = "tritonpy: " + Describe() + ": initialize failed";
    }
    return Status::Internal(error);
  }
  std::string mode = done.GetString("execute", "sync");
  if (mode != "sync" && mode != "async") {
    return Status::InvalidArg(
        "tritonpy: " + Describe() + ": INIT_DONE has an unknown execute " +
        "mode '" + mode + "'");
  }
  traits->async_execute = mode == "async";
  traits->has_is_ready = done.GetBool("is_ready", false);
  return Status();
}

Status
InstanceState::StartStub(
    std::unique_ptr<StubProcess>* process, std::shared_ptr<Channel>* channel,
    StubTraits* traits)
{
  // The model's first instance gets the stub that ran auto_complete_config,
  // already past HELLO (docs/protocol.md).
  std::unique_ptr<StubProcess> proc;
  std::shared_ptr<Channel> ch;
  const bool greeted = model_->TakeAutoCompleteStub(&proc, &ch);
  if (!greeted) {
    proc = std::make_unique<StubProcess>();
    int fd = -1;
    TRITONPY_RETURN_IF_ERROR(proc->Spawn(model_->stub_launch(), name_, &fd));
    ch = std::make_shared<Channel>(fd);
  }
  Status s = Handshake(proc.get(), ch, greeted, traits);
  if (!s.ok()) {
    // EOF lets a healthy stub exit by itself; then it is killed.
    ch->Shutdown();
    const std::string how = proc->EndWithin(2000);
    if (!how.empty()) {
      s = Status::Error(s.code(), s.message() + "; the stub " + how);
    }
    peers_.Clear();
    metrics_->Clear();  // what a failed initialize() created
    return s;
  }
  *process = std::move(proc);
  *channel = std::move(ch);
  return Status();
}

// ---------------------------------------------------------------- reader

void
InstanceState::SendError(Channel* channel, const std::string& message)
{
  auto frame = proto::MakeFrame(
      proto::FrameType::kError, 0, 0, [&](std::vector<uint8_t>* out) {
        proto::EncodeError({message.substr(0, 60000)}, out);
      });
  (void)channel->Send(frame);  // best effort: the peer may be gone
}

Status
InstanceState::ResolveBody(const proto::FrameView& f, const uint8_t** body)
{
  if (!f.body_in_arena) {
    *body = f.body;
    return Status();
  }
  return peers_.Resolve(
      f.body_ref.arena_id, f.body_ref.offset, f.body_len, body);
}

Status
InstanceState::HandleCommon(
    const proto::FrameView& f, const uint8_t* body, std::vector<int>* fds,
    Channel* channel, bool* handled)
{
  *handled = true;
  switch (f.type) {
    case proto::FrameType::kArena: {
      if (fds->size() != 1) {
        return Violation(
            "an ARENA frame must carry exactly one descriptor, got " +
            std::to_string(fds->size()));
      }
      proto::ArenaBody a;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeArena(body, f.body_len, &a));
      int fd = (*fds)[0];
      fds->clear();
      return peers_.Add(a.arena_id, fd, a.size);  // closes fd
    }
    case proto::FrameType::kLog: {
      proto::LogBody log;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeLog(body, f.body_len, &log));
      TRITONSERVER_LogLevel level =
          log.level <= 3 ? static_cast<TRITONSERVER_LogLevel>(log.level)
                         : TRITONSERVER_LOG_INFO;
      LogAt(level, log.file.c_str(), static_cast<int>(log.line), log.message);
      return Status();
    }
    case proto::FrameType::kMetric: {
      if (f.body_in_arena) return Violation("a METRIC body must be inline");
      std::shared_ptr<Channel> current;
      if (channel == nullptr) {
        current = stub_.CurrentChannel();
        channel = current.get();
      }
      return metrics_->OnFrame(f, body, channel);
    }
    case proto::FrameType::kError: {
      proto::ErrorBody e;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeError(body, f.body_len, &e));
      TRITONPY_LOG_ERROR(
          "tritonpy: stub for " + Describe() + " reported: " + e.message);
      return Status();
    }
    default:
      *handled = false;
      return Status();
  }
}

void
InstanceState::SyncLogLevels(Channel* channel)
{
  const uint32_t enabled = EnabledLogLevels();
  if (enabled == log_levels_sent_.load(std::memory_order_relaxed)) return;
  MutexLock lock(&log_levels_mu_);
  if (enabled == log_levels_sent_.load()) return;
  if (channel->Send(proto::MakeLogLevelsFrame(enabled)).ok()) {
    log_levels_sent_.store(enabled);
  }
}

Status
InstanceState::Dispatch(const uint8_t* msg, size_t len, std::vector<int>* fds)
{
  proto::FrameView f;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeHeader(msg, len, &f));
  if (f.type != proto::FrameType::kArena && !fds->empty()) {
    return Violation(
        std::string("a ") + proto::FrameTypeName(f.type) +
        " frame carried file descriptors");
  }
  const uint8_t* body = nullptr;
  TRITONPY_RETURN_IF_ERROR(ResolveBody(f, &body));
  bool handled = false;
  TRITONPY_RETURN_IF_ERROR(HandleCommon(f, body, fds, nullptr, &handled));
  if (handled) return Status();

  std::vector<proto::ArenaRef> release;
  if (f.body_in_arena) release.push_back(f.body_ref);
  switch (f.type) {
    case proto::FrameType::kResponses:
      stub_.NoteAnswered();
      TRITONPY_RETURN_IF_ERROR(table_.OnResponses(f, body, peers_, &release));
      break;
    case proto::FrameType::kExecuteDone: {
      stub_.NoteAnswered();
      proto::ExecuteDoneBody done;
      TRITONPY_RETURN_IF_ERROR(
          proto::DecodeExecuteDone(body, f.body_len, &done));
      TRITONPY_RETURN_IF_ERROR(table_.OnExecuteDone(
          f.id, done.ok != 0 ? Status() : Status::Internal(done.error)));
      break;
    }
    case proto::FrameType::kReady: {
      proto::ReadyBody ready;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeReady(body, f.body_len, &ready));
      OnReady(f.id, ready);
      break;
    }
    case proto::FrameType::kFinalizeDone: {
      std::string text;
      proto::DecodeJson(body, f.body_len, &text);
      json::Value doc;
      Status s = json::Parse(text, &doc);
      std::string error;
      if (!s.ok() || !doc.GetBool("ok", false)) {
        error = "tritonpy: " + Describe() + ": finalize failed: " +
                (s.ok() ? doc.GetString("error", "") : s.message());
      }
      stub_.OnFinalizeDone(std::move(error));
      break;
    }
    case proto::FrameType::kBlsRequest:
    case proto::FrameType::kBlsCancel:
    case proto::FrameType::kBlsRelease:
    case proto::FrameType::kModelControl:
      TRITONPY_RETURN_IF_ERROR(bls_->OnFrame(
          f, body, peers_, stub_.CurrentChannel(), &release,
          [this](uint64_t batch_id, uint32_t index) {
            return table_.OpenRequestTrace(batch_id, index);
          }));
      break;
    case proto::FrameType::kRelease: {
      // Backend allocations are freed when their batch ends; nothing to do.
      proto::ReleaseBody rb;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeRelease(body, f.body_len, &rb));
      break;
    }
    default:
      return Violation(
          std::string("unexpected ") + proto::FrameTypeName(f.type) +
          " frame from the stub");
  }
  if (!release.empty()) SendRelease(stub_.CurrentChannel().get(), release);
  return Status();
}

void
InstanceState::SendRelease(
    Channel* channel, const std::vector<proto::ArenaRef>& release)
{
  auto frame = proto::MakeFrame(
      proto::FrameType::kRelease, 0, 0,
      [&](std::vector<uint8_t>* out) { proto::EncodeRelease({release}, out); });
  // A release list too long for one frame is dropped: the stub keeps
  // that space, which is a leak but not an error.
  if (frame.size() <= proto::kMaxFrame && channel != nullptr) {
    (void)channel->Send(frame);
  }
}

void
InstanceState::ReaderLoop()
{
  // Named so that top -H, perf and bench/profile.py can tell it apart.
  pthread_setname_np(pthread_self(), "tritonpy-reader");
  while (true) {
    std::shared_ptr<Channel> channel = stub_.CurrentChannel();
    table_.Adopt();
    int timeout_ms = BatchTable::kPollMs;
    if (table_.open_requests() == 0) {
      // Idle: block, unless Execute registered a batch meanwhile (an
      // async Execute wakes us through wake_fd_ once it sees
      // reader_blocking_; a sync one does not, see Execute).
      reader_blocking_.store(true);
      table_.Adopt();
      if (table_.open_requests() == 0) {
        timeout_ms = stub_.AsyncExecute() ? kIdleLogPollMs : kSyncIdlePollMs;
        if (debug_counters_) {
          const int due = LogDebugCounters();
          if (due >= 0 && (timeout_ms < 0 || due < timeout_ms))
            timeout_ms = due;
        }
      } else {
        reader_blocking_.store(false);
      }
    }
    size_t len = 0;
    std::vector<int> fds;
    Status err;
    auto r =
        channel->Receive(&recv_buf_, &len, &fds, timeout_ms, &err, wake_fd_);
    reader_blocking_.store(false);
    std::string kill_reason;
    bool unloading = false;
    if (r == Channel::RecvResult::kTimeout) {
      SyncLogLevels(channel.get());
      table_.Adopt();
      table_.PollCancellation(true);
      PollUnload();
      kill_reason = OverDeadline(&unloading);
      if (kill_reason.empty()) continue;
    }
    if (r == Channel::RecvResult::kFrame) {
      table_.Adopt();
      err = Dispatch(recv_buf_.data(), len, &fds);
      CloseAll(&fds);
      if (err.ok()) {
        table_.PollCancellation(false);
        PollUnload();
        kill_reason = OverDeadline(&unloading);
        if (kill_reason.empty()) continue;
      }
    }
    CloseAll(&fds);
    if (!kill_reason.empty()) {
      TRITONPY_LOG_ERROR(
          "tritonpy: killing the stub for " + Describe() + ": " + kill_reason);
      if (!OnStubGone("", false, kill_reason, unloading)) return;
      continue;
    }
    bool violation = !err.ok();
    if (violation) {
      TRITONPY_LOG_ERROR(
          "tritonpy: stub for " + Describe() + ": " + err.message());
      SendError(channel.get(), err.message());
    }
    if (!OnStubGone(err.message(), violation)) return;
  }
}

bool
InstanceState::OnStubGone(
    const std::string& why, bool violation, const std::string& killed_because,
    bool unloading)
{
  // From here on Execute registers nothing with the old stub.
  const StubSupervisor::Death death =
      stub_.OnDeath(violation || !killed_because.empty());
  death.channel->Shutdown();
  bls_->OnStubGone();
  metrics_->Clear();
  const std::string msg = stub_.Reap(death, why, violation, killed_because);
  peers_.Clear();
  table_.Adopt();
  table_.FailAll(GoneStatus(death.stopping, unloading, msg));
  return stub_.Restart(msg, !killed_because.empty(), unloading);
}

Status
InstanceState::GoneStatus(bool stopping, bool unloading, const std::string& msg)
{
  if (stopping) {
    return Status::Unavailable(
        "tritonpy: model '" + model_->name() +
        "' was unloaded with this request in flight");
  }
  if (unloading) {
    return Status::Unavailable(
        "tritonpy: model '" + model_->name() + "' was unloaded with this " +
        "request in flight; " + msg);
  }
  return Status::Unavailable(msg);
}

}  // namespace tritonpy
