// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// InstanceReader: the reader thread of one model instance. It owns the
// socket's read side and, once the thread runs, everything it drives from
// there: it adopts registered batches (BatchTable), dispatches each frame
// the stub sends, polls cancellation, unloads (DRAIN and its grace) and
// the execute timeout, keeps the stub told of the log settings at idle,
// and when the stub dies has the StubSupervisor reap and restart it.
//
// Threads: everything here runs on the reader thread, except Start and
// Join (the instance's creating and deleting threads) and WakeIfIdle
// (Execute). The only state shared with other threads is the
// `blocking_` flag and the eventfd it guards the use of: the reader sets
// it before it blocks idle, and an async Execute that clears it wakes the
// reader through the eventfd. The parts it drives belong to the
// InstanceState, which joins the thread before it destroys them.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "bls/bls.h"
#include "instance/admission_gate.h"
#include "instance/batch_arenas.h"
#include "instance/batch_table.h"
#include "instance/fork_channels.h"
#include "instance/idle_counters.h"
#include "instance/readiness_queries.h"
#include "instance/stub_frames.h"
#include "model/drain_watcher.h"
#include "model/model_state.h"
#include "process/stub_supervisor.h"
#include "util/error.h"
#include "util/worker_thread.h"

namespace tritonpy {

class InstanceReader {
 public:
  // What the reader works on, owned by the InstanceState.
  struct Parts {
    ModelState* model;
    StubSupervisor* stub;
    StubFrames* frames;
    BatchTable* table;
    AdmissionGate* gate;  // batches pending, for IdleCounters
    BatchArenas* arenas;  // bytes allocated, for IdleCounters
    Bls* bls;
    ForkChannels* forks;  // the BLS channels of processes the stub forked
    LogLevelSync* log_levels;
    ReadinessQueries* readiness;
    DrainTarget* drain;  // shared with the backend's DrainWatcher
    // The receive buffer, shared with the StubStarter's handshakes.
    std::vector<uint8_t>* recv_buf;
  };

  // How long an idle reader of a sync instance blocks: a sync Execute
  // does not wake it, so a batch sent meanwhile has its cancellation
  // polled from at most this long after it started.
  static constexpr int kSyncIdlePollMs = 100;
  // How long an idle reader of an async instance blocks: how late a change
  // of Triton's log settings may reach a stub that gets no batch.
  static constexpr int kIdleLogPollMs = 1000;

  // `describe`: "model 'm' instance 'i'", for messages.
  InstanceReader(std::string describe, const Parts& parts);
  ~InstanceReader();  // closes the eventfd; Join first
  InstanceReader(const InstanceReader&) = delete;
  InstanceReader& operator=(const InstanceReader&) = delete;

  // False when the eventfd could not be made.
  bool ok() const { return wake_fd_ >= 0; }
  // Starts the thread, once the stub runs.
  void Start();
  // Returns once the thread exited (the supervisor stopped the stub).
  void Join();

  // Execute thread, async instance, after a batch is registered: an idle
  // reader blocks for up to kIdleLogPollMs and must be woken so that it
  // polls cancellation of the new batch. No syscall while it is busy.
  void WakeIfIdle()
  {
    if (blocking_.exchange(false)) {
      uint64_t one = 1;
      (void)!write(wake_fd_, &one, sizeof(one));
    }
  }

 private:
  // A step threw: the stub is killed and restarted, as on a protocol
  // violation. Returns whether the reader goes on.
  bool OnStepFailed(const Status& failed);
  // The thread's step: receives and handles one frame (or a timeout, or the
  // stub's death). Returns false when the reader must exit.
  bool Step();
  // Handles one received message; a failed Status is a protocol violation.
  Status Dispatch(const uint8_t* msg, size_t len, std::vector<int>* fds);
  // The stub is gone (EOF, error, violation): the supervisor reaps it,
  // every batch fails, and the supervisor restarts it unless the instance
  // stops. Returns false when the reader must exit. `killed_because`
  // (non-empty): the backend killed a healthy stub for that reason (a
  // timeout); such a death never counts as a crash loop.
  bool OnStubGone(
      const std::string& why, bool violation,
      const std::string& killed_because = "", bool unloading = false);
  // The error of every request in flight when the stub went away.
  Status GoneStatus(bool stopping, bool unloading, const std::string& msg);
  // Publishes the open requests to the drain watcher, and sends DRAIN once
  // the watcher saw the model being unloaded with work in flight.
  void PollUnload();
  // Returns why the stub must be killed now, or "": a batch whose execute
  // outran the execute timeout, or an unload whose grace ran out with
  // work still in flight (*unloading set).
  std::string OverDeadline(bool* unloading);

  const std::string describe_;
  ModelState* const model_;
  StubSupervisor* const stub_;
  StubFrames* const frames_;
  BatchTable* const table_;
  Bls* const bls_;
  ForkChannels* const forks_;
  LogLevelSync* const log_levels_;
  ReadinessQueries* const readiness_;
  DrainTarget* const drain_;
  std::vector<uint8_t>* const recv_buf_;

  int wake_fd_ = -1;  // eventfd: wakes the reader to adopt a new batch
  // Set by the reader before it blocks idle; Execute clears it and wakes
  // the reader through wake_fd_.
  std::atomic<bool> blocking_{false};

  WorkerThread thread_;  // it ends on its own once the stub stopped
  // Reader thread only.
  bool drain_sent_ = false;
  std::chrono::steady_clock::time_point drain_sent_at_;
  IdleCounters idle_counters_;  // TRITONPY_DEBUG=1
};

}  // namespace tritonpy
