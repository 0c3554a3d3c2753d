// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/instance_reader.h"

#include <sys/eventfd.h>

#include <chrono>
#include <memory>

#include "ipc/fd_closer.h"
#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"
#include "util/barrier.h"
#include "util/clock.h"
#include "util/json.h"

namespace tritonpy {

namespace {

// How long past finalize-grace-seconds a draining stub may keep requests.
constexpr int64_t kDrainSlackMs = 2000;

}  // namespace

InstanceReader::InstanceReader(std::string describe, const Parts& parts)
    : describe_(std::move(describe)),
      model_(parts.model),
      stub_(parts.stub),
      frames_(parts.frames),
      table_(parts.table),
      bls_(parts.bls),
      forks_(parts.forks),
      log_levels_(parts.log_levels),
      readiness_(parts.readiness),
      drain_(parts.drain),
      recv_buf_(parts.recv_buf),
      idle_counters_(
          describe_, {parts.table, parts.gate, parts.arenas, parts.bls})
{
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

InstanceReader::~InstanceReader()
{
  Join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void
InstanceReader::Start()
{
  // Named so that top -H, perf and bench/profile.py can tell it apart.
  thread_.Start(
      "tritonpy-reader", "the reader thread", [this] { return Step(); },
      [this](const Status& failed) { return OnStepFailed(failed); });
}

void
InstanceReader::Join()
{
  thread_.Join();
}

Status
InstanceReader::Dispatch(const uint8_t* msg, size_t len, std::vector<int>* fds)
{
  proto::FrameView f;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeHeader(msg, len, &f));
  if (f.type == proto::FrameType::kBlsChannel) {
    if (fds->size() != 1 || !IsUnixSeqpacket((*fds)[0])) {
      return Violation(
          "a BLS_CHANNEL frame must carry exactly one AF_UNIX SOCK_SEQPACKET "
          "socket");
    }
    if (f.body_in_arena) return Violation("a BLS_CHANNEL body in an arena");
    TRITONPY_RETURN_IF_ERROR(proto::DecodeEmpty(f.body, f.body_len));
    const int fd = (*fds)[0];
    fds->clear();
    forks_->Open(fd);
    return Status();
  }
  if (f.type != proto::FrameType::kArena && !fds->empty()) {
    return Violation(
        std::string("a ") + proto::FrameTypeName(f.type) +
        " frame carried file descriptors");
  }
  const uint8_t* body = nullptr;
  TRITONPY_RETURN_IF_ERROR(frames_->ResolveBody(f, &body));
  InjectFault(model_->name(), proto::FrameTypeName(f.type));
  bool handled = false;
  TRITONPY_RETURN_IF_ERROR(
      frames_->HandleCommon(f, body, fds, nullptr, &handled));
  if (handled) return Status();

  std::vector<proto::ArenaRef> release;
  if (f.body_in_arena) release.push_back(f.body_ref);
  switch (f.type) {
    case proto::FrameType::kResponses:
      stub_->NoteAnswered();
      TRITONPY_RETURN_IF_ERROR(
          table_->OnResponses(f, body, frames_->peers(), &release));
      break;
    case proto::FrameType::kExecuteDone: {
      stub_->NoteAnswered();
      proto::ExecuteDoneBody done;
      TRITONPY_RETURN_IF_ERROR(
          proto::DecodeExecuteDone(body, f.body_len, &done));
      TRITONPY_RETURN_IF_ERROR(table_->OnExecuteDone(
          f.id, done.ok != 0 ? Status() : Status::Internal(done.error)));
      break;
    }
    case proto::FrameType::kReady: {
      proto::ReadyBody ready;
      TRITONPY_RETURN_IF_ERROR(proto::DecodeReady(body, f.body_len, &ready));
      readiness_->OnAnswer(f.id, ready);
      break;
    }
    case proto::FrameType::kFinalizeDone: {
      std::string text;
      proto::DecodeJson(body, f.body_len, &text);
      json::Value doc;
      Status s = json::Parse(text, &doc);
      std::string error;
      if (!s.ok() || !json::GetBool(doc, "ok")) {
        error = "tritonpy: " + describe_ + ": finalize failed: " +
                (s.ok() ? json::GetString(doc, "error") : s.message());
      }
      stub_->OnFinalizeDone(std::move(error));
      break;
    }
    case proto::FrameType::kBlsRequest:
    case proto::FrameType::kBlsCancel:
    case proto::FrameType::kBlsRelease:
    case proto::FrameType::kModelControl:
      TRITONPY_RETURN_IF_ERROR(bls_->OnFrame(
          f, body, frames_->peers(), stub_->CurrentChannel(), &release,
          [this](uint64_t batch_id, uint32_t index) {
            return table_->OpenRequestTrace(batch_id, index);
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
  if (!release.empty()) SendRelease(stub_->CurrentChannel().get(), release);
  return Status();
}

bool
InstanceReader::OnStepFailed(const Status& failed)
{
  // An exception in a step costs the stub, not the server.
  TRITONPY_LOG_ERROR(
      "tritonpy: killing the stub for " + describe_ + ": " + failed.message());
  bool go_on = false;
  const Status again = Guarded("the reader thread", [&] {
    go_on = OnStubGone(failed.message(), true);
    return Status();
  });
  if (!again.ok()) {
    TRITONPY_LOG_ERROR(
        "tritonpy: the reader of " + describe_ + " stops: " + again.message());
    return false;
  }
  return go_on;
}

bool
InstanceReader::Step()
{
  std::shared_ptr<Channel> channel = stub_->CurrentChannel();
  table_->Adopt();
  int timeout_ms = BatchTable::kPollMs;
  if (table_->open_requests() == 0) {
    // Idle: block, unless Execute registered a batch meanwhile (an
    // async Execute wakes us through wake_fd_ once it sees blocking_;
    // a sync one does not, see Execute).
    blocking_.store(true);
    table_->Adopt();
    if (table_->open_requests() == 0) {
      timeout_ms = stub_->AsyncExecute() ? kIdleLogPollMs : kSyncIdlePollMs;
      if (idle_counters_.enabled()) {
        const int due = idle_counters_.Log();
        if (due >= 0 && (timeout_ms < 0 || due < timeout_ms)) timeout_ms = due;
      }
    } else {
      blocking_.store(false);
    }
  }
  size_t len = 0;
  std::vector<int> fds;
  Status err;
  auto r = channel->Receive(recv_buf_, &len, &fds, timeout_ms, &err, wake_fd_);
  blocking_.store(false);
  std::string kill_reason;
  bool unloading = false;
  if (r == Channel::RecvResult::kTimeout) {
    forks_->ReapEnded();
    log_levels_->Sync(channel.get());
    table_->Adopt();
    table_->PollCancellation(true);
    PollUnload();
    kill_reason = OverDeadline(&unloading);
    if (kill_reason.empty()) return true;
  }
  if (r == Channel::RecvResult::kFrame) {
    table_->Adopt();
    // An exception while handling the frame fails the stub that sent it.
    err = Guarded("handling a frame from the stub", [&] {
      return Dispatch(recv_buf_->data(), len, &fds);
    });
    CloseAll(&fds);
    if (err.ok()) {
      table_->PollCancellation(false);
      PollUnload();
      kill_reason = OverDeadline(&unloading);
      if (kill_reason.empty()) return true;
    }
  }
  CloseAll(&fds);
  if (kill_reason.empty() && r == Channel::RecvResult::kEof) {
    // The backend's own end gave up on a stub that stopped reading.
    kill_reason = channel->send_failure();
  }
  if (!kill_reason.empty()) {
    TRITONPY_LOG_ERROR(
        "tritonpy: killing the stub for " + describe_ + ": " + kill_reason);
    return OnStubGone("", false, kill_reason, unloading);
  }
  bool violation = !err.ok();
  if (violation) {
    TRITONPY_LOG_ERROR(
        "tritonpy: stub for " + describe_ + ": " + err.message());
    SendError(channel.get(), err.message());
  }
  return OnStubGone(err.message(), violation);
}

bool
InstanceReader::OnStubGone(
    const std::string& why, bool violation, const std::string& killed_because,
    bool unloading)
{
  // From here on Execute registers nothing with the old stub.
  const StubSupervisor::Death death =
      stub_->OnDeath(violation || !killed_because.empty());
  death.channel->Shutdown();
  forks_->ShutdownAll();  // its children have nobody to serve them
  bls_->OnStubGone();
  frames_->Clear();  // its arenas and metrics
  const std::string msg = stub_->Reap(death, why, violation, killed_because);
  table_->Adopt();
  table_->FailAll(GoneStatus(death.stopping, unloading, msg));
  const bool go_on = stub_->Restart(msg, !killed_because.empty(), unloading);
  forks_->CloseAll();  // once its requests failed and a new stub started
  return go_on;
}

Status
InstanceReader::GoneStatus(
    bool stopping, bool unloading, const std::string& msg)
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

void
InstanceReader::PollUnload()
{
  drain_->open_requests.store(table_->open_requests());
  if (table_->open_requests() == 0) {
    drain_sent_ = false;  // a later unload with new work drains again
    drain_->unloading.store(false);
    return;
  }
  if (drain_sent_ || !drain_->unloading.load()) return;
  std::shared_ptr<Channel> channel = stub_->CurrentChannel();
  if (channel == nullptr) return;
  TRITONPY_LOG_INFO(
      "tritonpy: " + describe_ + " is being unloaded with " +
      std::to_string(table_->open_requests()) +
      " request(s) in flight; they get finalize-grace-seconds to finish");
  // A failed send means the stub is gone: EOF.
  (void)channel->Send(proto::DrainFrame());
  drain_sent_ = true;
  drain_sent_at_ = Clock::now();
}

std::string
InstanceReader::OverDeadline(bool* unloading)
{
  *unloading = false;
  if (table_->open_requests() == 0) return "";
  const auto now = Clock::now();
  if (drain_sent_) {
    // The stub answers every open request itself once the grace is over;
    // one that cannot (stuck in a sync execute) is killed a little later.
    const double grace = model_->backend().settings().finalize_grace_seconds;
    if (now - drain_sent_at_ >
        std::chrono::milliseconds(
            static_cast<int64_t>(1000 * grace) + kDrainSlackMs)) {
      *unloading = true;
      return "it kept " + std::to_string(table_->open_requests()) +
             " request(s) after the unload's finalize-grace-seconds (" +
             json::FormatNumber(grace) + " s)";
    }
  }
  return table_->OverExecuteTimeout();
}

}  // namespace tritonpy
