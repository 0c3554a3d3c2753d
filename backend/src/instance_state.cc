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

#include "json.h"
#include "triton_util.h"

namespace tritonpy {

InstanceState::InstanceState(
    ModelState* model, TRITONBACKEND_ModelInstance* instance, std::string name,
    std::string kind, int32_t device_id, TRITONSERVER_Server* server)
    : model_(model),
      instance_(instance),
      name_(std::move(name)),
      kind_(std::move(kind)),
      device_id_(device_id),
      bls_(
          std::make_unique<Bls>(
              server, Describe(), model->backend().settings().arena_byte_size)),
      metrics_(
          std::make_unique<InstanceMetrics>(
              &model->backend().metric_store(),
              "model '" + model->name() + "'")),
      frames_(Describe(), metrics_.get(), &stub_),
      starter_(
          model, name_, kind_, device_id_, Describe(), &frames_, bls_.get(),
          &log_levels_, &stub_, &recv_buf_),
      stub_(
          Describe(), model->backend().settings().stub_restart_limit,
          [this](
              std::unique_ptr<StubProcess>* process,
              std::shared_ptr<Channel>* channel, StubTraits* traits) {
            return starter_.Start(process, channel, traits);
          }),
      gate_(
          Describe(), &stub_, model->max_inflight_batches(),
          model->sync_prefetch_batches(),
          2 * model->backend().settings().stub_timeout_seconds),
      arenas_(model->backend().settings().arena_byte_size),
      table_(model, instance, &stub_, &gate_, &arenas_),
      readiness_(
          Describe(), &stub_, model->backend().settings().ready_timeout_seconds)
{
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
  TRITONSERVER_Server* server = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelServer(model->triton_model(), &server));
  // Bls exists before the stub: initialize() may use the model loading API.
  std::unique_ptr<InstanceState> state(new InstanceState(
      model, instance, name,
      kind == TRITONSERVER_INSTANCEGROUPKIND_GPU     ? "GPU"
      : kind == TRITONSERVER_INSTANCEGROUPKIND_MODEL ? "MODEL"
                                                     : "CPU",
      device_id, server));
  if (state->wake_fd_ < 0) {
    return Status::Internal("tritonpy: eventfd failed");
  }
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
  const std::string wait_text = json::FormatNumber(
      settings.finalize_grace_seconds + settings.stub_timeout_seconds);
  TRITONPY_LOG_INFO("tritonpy: stopping stub for " + Describe());
  stub_.Stop(
      wait, wait_text, std::chrono::seconds(settings.stub_timeout_seconds),
      [this](Channel* channel) {
        log_levels_.Sync(channel);  // for what finalize() logs
      });
  if (reader_.joinable()) reader_.join();
  bls_.reset();      // cancels BLS calls still in flight
  metrics_.reset();  // deletes the stub's metrics from the server
  if (wake_fd_ >= 0) close(wake_fd_);
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
  TRITONPY_RETURN_IF_ERROR(frames_.ResolveBody(f, &body));
  bool handled = false;
  TRITONPY_RETURN_IF_ERROR(
      frames_.HandleCommon(f, body, fds, nullptr, &handled));
  if (handled) return Status();

  std::vector<proto::ArenaRef> release;
  if (f.body_in_arena) release.push_back(f.body_ref);
  switch (f.type) {
    case proto::FrameType::kResponses:
      stub_.NoteAnswered();
      TRITONPY_RETURN_IF_ERROR(
          table_.OnResponses(f, body, frames_.peers(), &release));
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
      readiness_.OnAnswer(f.id, ready);
      break;
    }
    case proto::FrameType::kFinalizeDone: {
      std::string text;
      proto::DecodeJson(body, f.body_len, &text);
      json::Value doc;
      Status s = json::Parse(text, &doc);
      std::string error;
      if (!s.ok() || !json::GetBool(doc, "ok")) {
        error = "tritonpy: " + Describe() + ": finalize failed: " +
                (s.ok() ? json::GetString(doc, "error") : s.message());
      }
      stub_.OnFinalizeDone(std::move(error));
      break;
    }
    case proto::FrameType::kBlsRequest:
    case proto::FrameType::kBlsCancel:
    case proto::FrameType::kBlsRelease:
    case proto::FrameType::kModelControl:
      TRITONPY_RETURN_IF_ERROR(bls_->OnFrame(
          f, body, frames_.peers(), stub_.CurrentChannel(), &release,
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
      log_levels_.Sync(channel.get());
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
  frames_.Clear();  // its arenas and metrics
  const std::string msg = stub_.Reap(death, why, violation, killed_because);
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
