// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "drain_watcher.h"

#include <pthread.h>
#include "barrier.h"
#include "triton_util.h"

#include <algorithm>
#include <chrono>

namespace tritonpy {

DrainWatcher::DrainWatcher(int period_ms) : period_ms_(period_ms)
{
  thread_ = std::thread([this] { Run(); });
}

DrainWatcher::~DrainWatcher()
{
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cv_.NotifyAll();
  }
  if (thread_.joinable()) thread_.join();
}

void
DrainWatcher::Register(const std::shared_ptr<DrainTarget>& target)
{
  MutexLock lock(&mu_);
  targets_.push_back(target);
}

void
DrainWatcher::Unregister(const DrainTarget* target)
{
  MutexLock lock(&mu_);
  targets_.erase(
      std::remove_if(
          targets_.begin(), targets_.end(),
          [target](const std::shared_ptr<DrainTarget>& t) {
            return t.get() == target;
          }),
      targets_.end());
}

void
DrainWatcher::Run()
{
  pthread_setname_np(pthread_self(), "tritonpy-drain");
  bool go_on = true;
  while (go_on) {
    // The barrier: a failed round is logged, and the next one tries again.
    const Status s = Guarded("the drain watcher", [&] {
      go_on = Round();
      return Status();
    });
    if (!s.ok()) TRITONPY_LOG_ERROR(s.message());
  }
}

bool
DrainWatcher::Round()
{
  std::vector<std::shared_ptr<DrainTarget>> busy;
  {
    MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(period_ms_);
    while (!stop_ && cv_.WaitUntil(deadline)) {}
    if (stop_) return false;
    for (const auto& t : targets_) {
      if (t->open_requests.load() > 0 && !t->unloading.load()) {
        busy.push_back(t);
      }
    }
  }
  // Outside the lock: an unregistering instance never waits on this.
  for (const auto& t : busy) {
    bool ready = true;
    TRITONSERVER_Error* err = TRITONSERVER_ServerModelIsReady(
        t->server, t->model_name.c_str(), t->model_version, &ready);
    if (err != nullptr) {
      // A model the server no longer knows is being unloaded too.
      TRITONSERVER_ErrorDelete(err);
      ready = false;
    }
    if (!ready && t->open_requests.load() > 0) t->unloading.store(true);
  }
  return true;
}

}  // namespace tritonpy
