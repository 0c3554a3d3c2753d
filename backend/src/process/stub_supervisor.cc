// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "process/stub_supervisor.h"

#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <utility>

#include "process/child_launch.h"
#include "protocol/protocol.h"
#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"

namespace tritonpy {

namespace {

constexpr int kFirstBackoffMs = 100;
constexpr int kMaxBackoffMs = 5000;
// A stub that dies sooner than this after starting counts as a crash loop.
constexpr auto kHealthyUptime = std::chrono::seconds(5);

}  // namespace

StubSupervisor::StubSupervisor(
    std::string describe, int restart_limit, StartFn start)
    : describe_(std::move(describe)),
      restart_limit_(restart_limit),
      start_(std::move(start))
{
}

void
StubSupervisor::Transition(StubState next, std::string down_reason)
{
  state_ = next;
  down_reason_ = std::move(down_reason);
  cv.NotifyAll();
}

void
StubSupervisor::Adopt(
    std::unique_ptr<StubProcess> process, std::shared_ptr<Channel> channel,
    const StubTraits& traits)
{
  process_ = std::move(process);
  channel_ = std::move(channel);
  traits_ = traits;
  pid_ = process_->pid();
  ++generation_;
  started_ = Clock::now();
  answered_ = false;
  if (pid_observer_) pid_observer_(pid_);
  Transition(StubState::kReady);
}

Status
StubSupervisor::Start()
{
  std::unique_ptr<StubProcess> process;
  std::shared_ptr<Channel> channel;
  StubTraits traits;
  TRITONPY_RETURN_IF_ERROR(start_(&process, &channel, &traits));
  process->Started();  // outside `mu`: it may wait for a stub template
  MutexLock lock(&mu);
  Adopt(std::move(process), std::move(channel), traits);
  TRITONPY_LOG_INFO(
      "tritonpy: started stub for " + describe_ + " (pid " +
      std::to_string(pid_) + ")");
  return Status();
}

StubSupervisor::Death
StubSupervisor::OnDeath(bool force_kill)
{
  MutexLock lock(&mu);
  Death death;
  death.channel = channel_;
  death.pid = pid_;
  death.stopping = shutting_down_;
  death.kill = kill_stub_ || force_kill;
  if (state_ == StubState::kReady) {
    Transition(StubState::kRestarting, down_reason_);
  }
  return death;
}

std::string
StubSupervisor::Reap(
    const Death& death, const std::string& why, bool violation,
    const std::string& killed_because)
{
  int status = 0;
  if (pid_observer_) pid_observer_(-1);
  // A stub that closed its socket is exiting: a short wait gets its status
  // (the error message names the signal) without delaying its streams.
  if (death.kill || !process_->WaitFor(death.stopping ? 3000 : 1000, &status)) {
    status = process_->KillAndReap();
  }
  std::string msg = "tritonpy: stub for " + describe_ + " (pid " +
                    std::to_string(death.pid) + ") ";
  if (violation) {
    msg += "was killed after a protocol violation (" + why + "): ";
  } else if (!killed_because.empty()) {
    msg += "was killed because " + killed_because + ": ";
  } else if (death.stopping) {
    msg += "stopped: ";
  } else {
    msg += "died: ";
  }
  msg += DescribeWaitStatus(status);
  if (!death.kill && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
    msg += "; a SIGKILL nobody sent on purpose usually comes from the " +
           std::string("kernel's out-of-memory killer");
  }
  return msg;
}

bool
StubSupervisor::GiveUp(const std::string& last)
{
  Transition(
      StubState::kDown,
      "the stub failed " + std::to_string(crash_streak_) +
          " times in a row, each within " +
          std::to_string(kHealthyUptime.count()) +
          " s of starting and before answering anything " +
          "(stub-restart-limit=" + std::to_string(restart_limit_) +
          "); last: " + last + "; load the model again to retry");
  TRITONPY_LOG_ERROR(
      "tritonpy: " + describe_ + " is unavailable: " + down_reason_);
  return false;  // the reader exits; requests fail with down_reason_
}

bool
StubSupervisor::WaitBackoff(int backoff_ms)
{
  MutexLock lock(&mu);
  const auto deadline = Clock::now() + std::chrono::milliseconds(backoff_ms);
  while (!shutting_down_ && cv.WaitUntil(deadline)) {}
  if (shutting_down_) {
    Transition(StubState::kStopped, down_reason_);
    return false;
  }
  Transition(StubState::kRestarting, down_reason_);
  return true;
}

bool
StubSupervisor::Restart(const std::string& msg, bool timed_out, bool unloading)
{
  // A stub that answered requests was healthy, however short its life.
  const bool crash_loop =
      !timed_out && !answered_ && Clock::now() - started_ < kHealthyUptime;
  crash_streak_ = crash_loop ? crash_streak_ + 1 : 0;
  {
    MutexLock lock(&mu);
    pid_ = -1;
    // An instance whose model is being unloaded is not restarted.
    if (shutting_down_) {
      Transition(StubState::kStopped, down_reason_);
      return false;
    }
    if (unloading) {
      Transition(StubState::kDown, "the model is being unloaded");
      return false;
    }
    if (restart_limit_ > 0 && crash_streak_ > restart_limit_) {
      return GiveUp(msg);
    }
    Transition(StubState::kRestarting, down_reason_);
  }
  TRITONPY_LOG_WARN(msg + "; restarting it");

  int backoff_ms = backoff_ms_;
  backoff_ms_ =
      crash_loop ? std::min(backoff_ms_ * 2, kMaxBackoffMs) : kFirstBackoffMs;
  bool wait_first = crash_loop;
  while (true) {
    if (wait_first && !WaitBackoff(backoff_ms)) return false;
    wait_first = true;
    std::unique_ptr<StubProcess> process;
    std::shared_ptr<Channel> channel;
    StubTraits traits;
    Status s = start_(&process, &channel, &traits);
    if (s.ok()) process->Started();  // outside `mu`, as in Start
    MutexLock lock(&mu);
    if (s.ok() && !shutting_down_) {
      Adopt(std::move(process), std::move(channel), traits);
      TRITONPY_LOG_INFO(
          "tritonpy: restarted stub for " + describe_ + " (pid " +
          std::to_string(pid_) + ")");
      return true;
    }
    if (shutting_down_) {
      Transition(StubState::kStopped, down_reason_);
      return false;  // process (if any) is killed by its destructor
    }
    ++crash_streak_;
    if (restart_limit_ > 0 && crash_streak_ > restart_limit_) {
      return GiveUp(s.message());
    }
    Transition(StubState::kDown, s.message());
    TRITONPY_LOG_WARN(
        "tritonpy: could not restart the stub for " + describe_ + ": " +
        s.message() + "; retrying in " + std::to_string(backoff_ms) + " ms");
    backoff_ms = std::min(backoff_ms * 2, kMaxBackoffMs);
  }
}

void
StubSupervisor::Stop(
    std::chrono::milliseconds wait, const std::string& wait_text,
    std::chrono::seconds exit_wait,
    const std::function<void(Channel*)>& before_finalize)
{
  std::shared_ptr<Channel> channel;
  bool ready;
  {
    MutexLock lock(&mu);
    shutting_down_ = true;
    channel = channel_;
    ready = state_ == StubState::kReady;
    cv.NotifyAll();  // waiters give up: the instance stops
  }
  bool clean = false;
  if (ready && channel != nullptr) {
    before_finalize(channel.get());
    // The stub gives in-flight work finalize_grace_seconds, then cancels
    // it, completes every open request itself and answers FINALIZE_DONE.
    if (channel->Send(proto::FinalizeFrame()).ok()) {
      MutexLock lock(&mu);
      const auto deadline = Clock::now() + wait;
      while (!finalize_done_ && state_ != StubState::kStopped &&
             cv.WaitUntil(deadline)) {}
      const bool done = finalize_done_ || state_ == StubState::kStopped;
      if (!done) {
        TRITONPY_LOG_WARN(
            "tritonpy: stub for " + describe_ + " did not answer FINALIZE " +
            "within " + wait_text + " s " +
            "(finalize-grace-seconds + stub-timeout-seconds); killing it");
      } else if (!finalize_error_.empty()) {
        TRITONPY_LOG_ERROR(finalize_error_);
      }
      clean = done;
      if (done) {
        // After FINALIZE_DONE the stub exits by itself; the reader reaps it.
        const auto exit_deadline = Clock::now() + exit_wait;
        while (state_ != StubState::kStopped && cv.WaitUntil(exit_deadline)) {}
      }
    }
  }
  {
    MutexLock lock(&mu);
    if (!clean || state_ != StubState::kStopped) kill_stub_ = true;
    channel = channel_;
  }
  // Whatever is left: EOF wakes the reader, which kills, reaps and fails
  // every request still open.
  if (channel != nullptr) channel->Shutdown();
}

void
StubSupervisor::OnFinalizeDone(std::string error)
{
  MutexLock lock(&mu);
  finalize_done_ = true;
  finalize_error_ = std::move(error);
  cv.NotifyAll();
}

std::shared_ptr<Channel>
StubSupervisor::CurrentChannel()
{
  MutexLock lock(&mu);
  return channel_;
}

bool
StubSupervisor::AsyncExecute()
{
  MutexLock lock(&mu);
  return traits_.async_execute;
}

bool
StubSupervisor::stopping()
{
  MutexLock lock(&mu);
  return shutting_down_;
}

std::string
StubSupervisor::UnavailableReason(const char* restarting) const
{
  if (state_ == StubState::kRestarting) return restarting;
  return down_reason_.empty() ? "the stub is not running" : down_reason_;
}

}  // namespace tritonpy
