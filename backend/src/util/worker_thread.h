// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// WorkerThread: the one way the backend runs a thread of its own (the
// reader of each instance, the drain watcher, the stub memory reporter,
// the descriptor closer, the model-control worker, the stub templates'
// starter, the sandboxed stubs' log relay). A named thread that runs a step
// over and over, each behind an exception barrier (barrier.h), until the step
// returns false or Stop is called; with a wake-up that a step can wait for.
//
// What the loop works on stays with its owner, under the owner's lock; the
// thread holds only its own: a stop flag and a wake flag. A Wake is never
// lost: it stays set until the next Wait returns, so an owner that queues
// work under its lock, then wakes, needs no wait under that lock.
//
// Threads: Start, Stop, Wake and Join from any thread (Join from the
// worker itself detaches it); Wait, WaitUntil and WaitFor only from the
// worker, between the steps' work.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "util/error.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace tritonpy {

class WorkerThread {
 public:
  // One pass of the loop; false ends the thread.
  using Step = std::function<bool()>;
  // A step threw: `failed` says what (Status::Internal("tritonpy: <where>:
  // ...")). Returns whether the loop goes on. (The thread logs nothing
  // itself: it also runs where Triton's log is not, in the C++ tests.)
  using OnFailure = std::function<bool(const Status& failed)>;

  WorkerThread() = default;
  ~WorkerThread();  // Stop, then Join
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Starts the thread, named `name` for top -H and perf (at most 15
  // bytes), running `step` until it returns false or Stop. `where` names
  // the thread in the barrier's messages ("the drain watcher"). What
  // `step` and `on_failure` hold is released on the thread when it ends:
  // a step may hold its owner alive. REQUIRES: not started, or joined.
  void Start(
      const char* name, const char* where, Step step, OnFailure on_failure)
      EXCLUDES(mu_);
  bool started() const EXCLUDES(mu_);

  // Ends the loop at its next step, and ends a Wait at once. A thread
  // started after Stop ends before its first step.
  void Stop() EXCLUDES(mu_);
  bool stopping() const { return stop_.load(std::memory_order_acquire); }
  // Returns once the thread ended. Called on the thread itself (a step
  // that destroys its owner), detaches it instead.
  void Join() EXCLUDES(mu_);

  // Ends the worker's current or next Wait.
  void Wake() EXCLUDES(mu_);

  // Worker only. Waits for a Wake (the last one not yet waited for ends it
  // at once) or Stop; WaitUntil also for `deadline`. Returns false once
  // stopping.
  bool Wait() EXCLUDES(mu_);
  bool WaitUntil(std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_);
  bool WaitFor(std::chrono::milliseconds period) EXCLUDES(mu_)
  {
    return WaitUntil(std::chrono::steady_clock::now() + period);
  }

 private:
  void Run(const char* where, const Step& step, const OnFailure& on_failure);

  mutable Mutex mu_;
  CondVar cv_{&mu_};
  bool woken_ GUARDED_BY(mu_) = false;
  // Written under mu_ (so that a Wait cannot miss it), read without.
  std::atomic<bool> stop_{false};
  std::thread thread_ GUARDED_BY(mu_);
};

}  // namespace tritonpy
