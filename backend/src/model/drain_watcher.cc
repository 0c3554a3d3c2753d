// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "model/drain_watcher.h"

#include <algorithm>
#include <chrono>

#include "triton/triton_util.h"

namespace tritonpy {

DrainWatcher::DrainWatcher(int period_ms) : period_ms_(period_ms)
{
  thread_.Start(
      "tritonpy-drain", "the drain watcher", [this] { return Round(); },
      LogAndGoOn);
}

DrainWatcher::~DrainWatcher()
{
  thread_.Stop();
  thread_.Join();
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

bool
DrainWatcher::Round()
{
  // Nothing wakes it: a round every period.
  if (!thread_.WaitFor(std::chrono::milliseconds(period_ms_))) return false;
  std::vector<std::shared_ptr<DrainTarget>> busy;
  {
    MutexLock lock(&mu_);
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
