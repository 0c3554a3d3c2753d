// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/response_lane.h"

#include <thread>
#include <utility>
#include <vector>

namespace tritonpy {

ResponseLane::ResponseLane(FrontEndPacer* pacer, SendFn send, size_t max_parked)
    : pacer_(pacer), send_(send), max_parked_(max_parked)
{
}

bool
ResponseLane::SendNow(const void* stream, bool first)
{
  bool others_parked = false;
  {
    MutexLock lock(&mu_);
    if (per_stream_.count(stream) != 0) return false;  // its order first
    others_parked = !per_stream_.empty();
    if (first && others_parked) ++counters_.overtakes;
  }
  if (first) {
    pacer_->BeforeSend();  // room in the queues, not the backlog
    return true;
  }
  // A later response goes behind what is parked, and parks rather than
  // holding the reader in the pacer.
  return !others_parked && pacer_->TryBeforeSend();
}

void
ResponseLane::Park(ParkedResponse parked)
{
  {
    MutexLock lock(&mu_);
    ++per_stream_[parked.stream];
    queue_.push_back(std::move(parked));
    parked_count_.store(queue_.size());
    ++counters_.parked;
  }
  while (parked_count_.load() > max_parked_) {
    // Another thread draining sends them; this one waits its turn.
    if (Drain(true) == 0) std::this_thread::yield();
  }
}

size_t
ResponseLane::Drain(bool wait)
{
  bool idle = false;
  if (!draining_.compare_exchange_strong(idle, true)) return 0;
  size_t sent = 0;
  for (;;) {
    if (parked_count_.load() == 0) break;
    if (wait && sent == 0) {
      pacer_->BeforeSend();
    } else if (!pacer_->TryBeforeSend()) {
      break;
    }
    ParkedResponse p;
    {
      MutexLock lock(&mu_);
      // Only the drainer takes from the queue: it still holds one.
      p = std::move(queue_.front());
      queue_.pop_front();
      parked_count_.store(queue_.size());
    }
    send_(&p);
    {
      // Counted until sent: a later response of its stream parks
      // meanwhile instead of overtaking it.
      MutexLock lock(&mu_);
      auto it = per_stream_.find(p.stream);
      if (it != per_stream_.end() && --it->second == 0) per_stream_.erase(it);
    }
    ++sent;
  }
  draining_.store(false);
  return sent;
}

void
ResponseLane::DrainAll()
{
  while (!empty()) {
    if (Drain(true) == 0) std::this_thread::yield();
  }
}

void
ResponseLane::DrainThrough(const void* stream)
{
  // Only this stream's responses must go: they leave the queue, in order,
  // ahead of the others' (no stream's order changes).
  for (bool idle = false; !draining_.compare_exchange_strong(idle, true);
       idle = false) {
    std::this_thread::yield();  // another thread is sending parked ones
  }
  std::vector<ParkedResponse> mine;
  {
    MutexLock lock(&mu_);
    if (per_stream_.count(stream) != 0) {
      std::deque<ParkedResponse> rest;
      for (ParkedResponse& p : queue_) {
        if (p.stream == stream) {
          mine.push_back(std::move(p));
        } else {
          rest.push_back(std::move(p));
        }
      }
      queue_.swap(rest);
      parked_count_.store(queue_.size());
    }
  }
  for (ParkedResponse& p : mine) {
    pacer_->BeforeSend();
    send_(&p);
  }
  if (!mine.empty()) {
    MutexLock lock(&mu_);
    per_stream_.erase(stream);
  }
  draining_.store(false);
}

ResponseLane::Counters
ResponseLane::counters()
{
  MutexLock lock(&mu_);
  return counters_;
}

}  // namespace tritonpy
