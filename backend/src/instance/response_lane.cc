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
    if (streams_.count(stream) != 0) return false;  // its order first
    others_parked = !streams_.empty();
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
    order_.push_back(parked.stream);
    streams_[parked.stream].waiting.push_back(std::move(parked));
    parked_count_.fetch_add(1);
    ++counters_.parked;
  }
  while (parked_count_.load() > max_parked_) {
    // Another thread draining sends them; this one waits its turn.
    if (Drain(true) == 0) std::this_thread::yield();
  }
}

bool
ResponseLane::TakeNext(ParkedResponse* out)
{
  while (!order_.empty()) {
    const void* key = order_.front();
    order_.pop_front();
    auto it = streams_.find(key);
    if (it == streams_.end() || it->second.waiting.empty()) continue;
    *out = std::move(it->second.waiting.front());
    it->second.waiting.pop_front();
    ++it->second.sending;
    parked_count_.fetch_sub(1);
    return true;
  }
  return false;
}

void
ResponseLane::Sent(const void* stream, size_t n)
{
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  it->second.sending -= n;
  if (it->second.sending == 0 && it->second.waiting.empty()) streams_.erase(it);
}

size_t
ResponseLane::Drain(bool wait)
{
  bool idle = false;
  if (!draining_.compare_exchange_strong(idle, true)) return 0;
  size_t sent = 0;
  while (!empty()) {
    if (wait && sent == 0) {
      pacer_->BeforeSend();
    } else if (!pacer_->TryBeforeSend()) {
      break;
    }
    ParkedResponse p;
    {
      MutexLock lock(&mu_);
      if (!TakeNext(&p)) break;  // only the drainer takes: not reached
    }
    send_(&p);
    {
      // Counted until sent: a later response of its stream parks
      // meanwhile instead of overtaking it.
      MutexLock lock(&mu_);
      Sent(p.stream, 1);
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
  // Only this stream's responses must go: they leave, in order, ahead of
  // the others' (no stream's order changes).
  for (bool idle = false; !draining_.compare_exchange_strong(idle, true);
       idle = false) {
    std::this_thread::yield();  // another thread is sending parked ones
  }
  std::deque<ParkedResponse> mine;
  {
    MutexLock lock(&mu_);
    auto it = streams_.find(stream);
    if (it != streams_.end()) {
      mine.swap(it->second.waiting);
      it->second.sending += mine.size();
      parked_count_.fetch_sub(mine.size());
    }
  }
  for (ParkedResponse& p : mine) {
    pacer_->BeforeSend();
    send_(&p);
  }
  if (!mine.empty()) {
    MutexLock lock(&mu_);
    Sent(stream, mine.size());
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
