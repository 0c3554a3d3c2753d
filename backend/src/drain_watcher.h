// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// DrainWatcher: notices that a model is being unloaded while its requests
// are still in flight.
//
// Triton 2.51 finalizes a model instance only once none of its requests is
// alive, so an unload (or shutdown) with open streams or async batches would
// never reach the backend. One thread per backend polls
// TRITONSERVER_ServerModelIsReady for the instances that have requests in
// flight; a model that stops being ready while it has work is unloading,
// and its instances are told to drain (the stub gives in-flight work
// finalize-grace-seconds, then cancels it and answers every open request).
//
// The watcher never calls into an InstanceState: it only sets a flag on a
// shared DrainTarget that the instance's reader thread reads. It calls the
// server without holding its own lock, so an instance being destroyed
// (which unregisters under that lock) never waits on a server call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tritonpy/triton_api.h"

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
  void Run();

  const int period_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                                  // guarded by mu_
  std::vector<std::shared_ptr<DrainTarget>> targets_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tritonpy
