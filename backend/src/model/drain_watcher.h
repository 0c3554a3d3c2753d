// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// DrainWatcher: notices that a model is being unloaded while its requests
// are still in flight.
//
// Triton finalizes a model instance only once none of its requests (nor
// their response factories) is alive: an unload or a shutdown with open
// streams or async batches waits for them, and at shutdown Triton gives up
// after its exit timeout and exits. That is what happens by default, as on
// the official backend. With finalize-grace-seconds set (more than 0),
// instances register here: one thread per backend polls
// TRITONSERVER_ServerModelIsReady for those that have requests in flight;
// a model that stops being ready while it has work is unloading (or the
// server is exiting), and its instances are told to drain (the stub gives
// in-flight work finalize-grace-seconds, then cancels it and answers every
// open request).
//
// The watcher never calls into an InstanceState: it only sets a flag on a
// shared DrainTarget that the instance's reader thread reads. It calls the
// server without holding its own lock, so an instance being destroyed
// (which unregisters under that lock) never waits on a server call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "triton_c_api/triton_api.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"
#include "util/worker_thread.h"

namespace tritonpy {

struct DrainTarget {
  TRITONSERVER_Server* server = nullptr;
  std::string model_name;
  int64_t model_version = -1;
  std::atomic<uint64_t> open_requests{0};  // written by the reader thread
  std::atomic<bool> unloading{false};      // set by the watcher
};

class DrainWatcher {
 public:
  explicit DrainWatcher(int period_ms = 100);
  ~DrainWatcher();  // stops and joins the thread
  DrainWatcher(const DrainWatcher&) = delete;
  DrainWatcher& operator=(const DrainWatcher&) = delete;

  void Register(const std::shared_ptr<DrainTarget>& target);
  void Unregister(const DrainTarget* target);

 private:
  // The thread's step: waits one period, then marks the busy targets whose
  // model is being unloaded. False once stopped.
  bool Round() EXCLUDES(mu_);

  const int period_ms_;
  Mutex mu_;
  std::vector<std::shared_ptr<DrainTarget>> targets_ GUARDED_BY(mu_);
  WorkerThread thread_;  // last: stopped and joined first
};

}  // namespace tritonpy
