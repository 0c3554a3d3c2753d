// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "util/worker_thread.h"

#include <pthread.h>

#include <utility>

#include "util/barrier.h"

namespace tritonpy {

WorkerThread::~WorkerThread()
{
  Stop();
  Join();
}

void
WorkerThread::Start(
    const char* name, const char* where, Step step, OnFailure on_failure)
{
  MutexLock lock(&mu_);
  // The closure, and what the step holds, belong to the thread: they are
  // released there once Run returns.
  thread_ = std::thread([this, name, where, step = std::move(step),
                         on_failure = std::move(on_failure)] {
    pthread_setname_np(pthread_self(), name);
    Run(where, step, on_failure);
  });
}

bool
WorkerThread::started() const
{
  MutexLock lock(&mu_);
  return thread_.joinable();
}

void
WorkerThread::Run(
    const char* where, const Step& step, const OnFailure& on_failure)
{
  bool go_on = true;
  while (go_on && !stopping()) {
    const Status failed = Guarded(where, [&] {
      go_on = step();
      return Status();
    });
    if (!failed.ok()) go_on = on_failure(failed);
  }
}

void
WorkerThread::Stop()
{
  MutexLock lock(&mu_);
  stop_.store(true, std::memory_order_release);
  cv_.NotifyAll();
}

void
WorkerThread::Join()
{
  std::thread thread;
  {
    MutexLock lock(&mu_);
    thread.swap(thread_);
  }
  if (!thread.joinable()) return;
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();
  } else {
    thread.join();
  }
}

void
WorkerThread::Wake()
{
  MutexLock lock(&mu_);
  woken_ = true;
  cv_.NotifyAll();
}

bool
WorkerThread::Wait()
{
  MutexLock lock(&mu_);
  while (!woken_ && !stopping()) cv_.Wait();
  woken_ = false;
  return !stopping();
}

bool
WorkerThread::WaitUntil(std::chrono::steady_clock::time_point deadline)
{
  MutexLock lock(&mu_);
  while (!woken_ && !stopping() && cv_.WaitUntil(deadline)) {}
  woken_ = false;
  return !stopping();
}

}  // namespace tritonpy
