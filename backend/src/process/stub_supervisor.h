// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// StubSupervisor: the life of one instance's stub process. It starts the
// stub, reaps it when it goes away, restarts it with backoff, gives up
// after stub-restart-limit crashes in a row, and stops it (FINALIZE) when
// the instance is deleted.
//
//   kStopped --Start--> kReady --death--> kRestarting --started--> kReady
//                                             |  ^
//                          restart failed     v  | backoff over
//                                            kDown
//   kRestarting/kDown --crash loop over the limit, or unload--> kDown
//   any --instance deleted--> kStopped
//
// The state changes in Transition() only, which also wakes every waiter.
//
// Threads: Start runs on the creating thread before the reader exists;
// OnDeath / Reap / Restart run on the reader thread, which owns the
// process; Stop runs on the deleting thread. `mu` is the instance's one
// mutex: it guards the fields below, the AdmissionGate's batch counters
// (so that Execute sees the stub and its room in flight in one step) and
// the ReadinessQueries in flight.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "ipc/channel.h"
#include "process/stub_process.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace tritonpy {

enum class StubState {
  kStopped,     // no stub: before Start, and once the instance is deleted
  kReady,       // the stub runs and takes batches
  kRestarting,  // the stub went away; a new one is being started
  kDown,        // no stub; down_reason() says why (given up, unloading,
                // or a restart failed and the next one waits for backoff)
};

// What INIT_DONE told about the model.
struct StubTraits {
  bool async_execute = false;
  bool has_is_ready = false;
};

class StubSupervisor {
 public:
  // Spawns (or adopts) a stub and runs the handshake; on failure the
  // process has been reaped. Runs without `mu` held.
  using StartFn = std::function<Status(
      std::unique_ptr<StubProcess>*, std::shared_ptr<Channel>*, StubTraits*)>;

  // `describe`: "model 'm' instance 'i'", for messages.
  StubSupervisor(std::string describe, int restart_limit, StartFn start);

  // Called with a stub's pid when it is adopted (under `mu`), and with -1
  // just before it is reaped (reader thread), after which its pid may be
  // reused: what watches the process (its memory metrics) stops then.
  // Set before Start.
  using PidObserver = std::function<void(pid_t)>;
  void set_pid_observer(PidObserver fn) { pid_observer_ = std::move(fn); }

  // The first stub; kReady on success.
  Status Start() EXCLUDES(mu);

  // What the reader knows of a stub that went away.
  struct Death {
    std::shared_ptr<Channel> channel;
    pid_t pid = -1;
    bool stopping = false;  // the instance is being deleted
    bool kill = false;      // no grace: kill rather than wait for the exit
  };
  // Reader thread. A kReady stub becomes kRestarting: from here on Execute
  // registers nothing with it. `force_kill`: a violation or a timeout.
  Death OnDeath(bool force_kill) EXCLUDES(mu);
  // Reader thread. Waits briefly for (or kills) the process and returns
  // "tritonpy: stub for <describe> (pid N) died: <how>" and friends.
  std::string Reap(
      const Death& death, const std::string& why, bool violation,
      const std::string& killed_because);
  // Reader thread, after the batches of the dead stub were failed. Starts
  // a new stub unless the instance stops, the model unloads or the crash
  // loop is over the limit. `timed_out`: the backend killed a healthy
  // stub, which never counts as a crash. Returns false when the reader
  // must exit (no stub will come).
  bool Restart(const std::string& msg, bool timed_out, bool unloading)
      EXCLUDES(mu);

  // Deleting thread: FINALIZE (the stub gives in-flight work
  // finalize-grace-seconds), waits `wait` for FINALIZE_DONE and the exit,
  // then makes the reader kill whatever is left and shuts the socket.
  // `before_finalize` runs just before FINALIZE is sent.
  void Stop(
      std::chrono::milliseconds wait, const std::string& wait_text,
      std::chrono::seconds exit_wait,
      const std::function<void(Channel*)>& before_finalize) EXCLUDES(mu);
  // Reader thread: FINALIZE_DONE arrived; `error` non-empty if finalize()
  // failed.
  void OnFinalizeDone(std::string error) EXCLUDES(mu);

  // Reader thread: the stub answered something since it started (a
  // healthy stub, whatever its uptime).
  void NoteAnswered() { answered_ = true; }

  // The running stub's channel (null before Start).
  std::shared_ptr<Channel> CurrentChannel() EXCLUDES(mu);
  // The running stub's model has an async execute().
  bool AsyncExecute() EXCLUDES(mu);
  bool stopping() EXCLUDES(mu);

  StubState state() const REQUIRES(mu) { return state_; }
  const std::string& down_reason() const REQUIRES(mu) { return down_reason_; }
  const std::shared_ptr<Channel>& channel() const REQUIRES(mu)
  {
    return channel_;
  }
  uint64_t generation() const REQUIRES(mu) { return generation_; }
  const StubTraits& traits() const REQUIRES(mu) { return traits_; }
  bool shutting_down() const REQUIRES(mu) { return shutting_down_; }
  // kReady and not stopping: batches may go to the stub.
  bool serving() const REQUIRES(mu)
  {
    return state_ == StubState::kReady && !shutting_down_;
  }
  // Why a request cannot be served now ("the stub is restarting"...).
  std::string UnavailableReason(const char* restarting) const REQUIRES(mu);

  // The instance's one mutex (see the top of this file), and the condition
  // every waiter of the instance waits on.
  Mutex mu;
  CondVar cv{&mu};

 private:
  // The one place the state changes; wakes every waiter.
  void Transition(StubState next, std::string down_reason = {}) REQUIRES(mu);
  // Adopts a started stub: kReady.
  void Adopt(
      std::unique_ptr<StubProcess> process, std::shared_ptr<Channel> channel,
      const StubTraits& traits) REQUIRES(mu);
  // kDown for good; returns false (the reader exits).
  bool GiveUp(const std::string& last) REQUIRES(mu);
  // Sleeps `backoff_ms` unless the instance stops meanwhile (then
  // kStopped and false).
  bool WaitBackoff(int backoff_ms) EXCLUDES(mu);

  const std::string describe_;
  const int restart_limit_;
  const StartFn start_;
  PidObserver pid_observer_;

  StubState state_ GUARDED_BY(mu) = StubState::kStopped;
  std::string down_reason_ GUARDED_BY(mu);
  std::shared_ptr<Channel> channel_ GUARDED_BY(mu);
  pid_t pid_ GUARDED_BY(mu) = -1;
  uint64_t generation_ GUARDED_BY(mu) = 0;  // +1 per stub
  StubTraits traits_ GUARDED_BY(mu);
  bool shutting_down_ GUARDED_BY(mu) = false;
  bool kill_stub_ GUARDED_BY(mu) = false;  // no grace left
  bool finalize_done_ GUARDED_BY(mu) = false;
  std::string finalize_error_ GUARDED_BY(mu);

  // Reader thread only (or the creating thread before it starts).
  std::unique_ptr<StubProcess> process_;
  Clock::time_point started_;
  int backoff_ms_ = 100;
  // Deaths in a row within kHealthyUptime of starting without having
  // answered anything, and failed restarts.
  int crash_streak_ = 0;
  bool answered_ = false;  // RESPONSES or EXECUTE_DONE since it started
};

}  // namespace tritonpy
