// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// ResponseLane: lets a stream's first response overtake the backlog that
// FrontEndPacer holds back (issue 40, docs/llm-serving.md "HTTP streams").
//
// Without it a reader thread that runs out of the pacer's budget waits in
// the pacer on whatever response is next, and a new stream's first token
// waits behind every token read before it, however many. With it, when
// the pacer would wait, a response that is not its stream's first is
// parked here instead and the reader goes on reading frames: a first
// response then only waits for room in the front end's queue (the pacer
// still guards it), not for the backlog. Parked responses leave in the
// order they came, whenever the pacer has budget (Drain, between frames,
// and with a wait when the reader has nothing to read), except that a
// stream's final response takes its stream's ahead (DrainThrough).
//
// The promises:
//  - a stream's responses leave in the order they were delivered: once a
//    stream has one parked, all its later ones (a final flag too) park
//    behind it, so nothing overtakes an earlier response of its stream and
//    the final flag stays last;
//  - nothing is lost: a parked response is sent exactly once;
//  - a stream's final response is sent before its request is released:
//    DrainThrough sends the stream's parked responses ahead of the others'
//    (Triton 2.51's HTTP front end loses what a generate_stream request
//    sends after its release);
//  - what is parked is bounded (max_parked): Park drains, waiting for the
//    pacer, until the lane is below it again, so the reader pushes back on
//    the stub as it did before the lane.
// Streams are told apart by a key (the request's handle): a key reused by
// a new stream while an old one still has responses parked only makes the
// new one park too, which keeps every promise.
// Thread-safe; one process-wide lane in the backend (response_writer.cc).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "instance/frontend_pacer.h"
#include "util/error.h"
#include "util/mutex.h"

namespace tritonpy {

// One response waiting in the lane.
struct ParkedResponse {
  const void* stream = nullptr;  // the key of its stream
  void* response = nullptr;      // the response; null: a final flag alone
  void* factory = nullptr;       // what sends a flag alone (owned then)
  uint32_t flags = 0;
  Status error;            // the response's error, if it is an error response
  std::string request_id;  // for messages
};

class ResponseLane {
 public:
  // Sends one parked response (and frees what it owns).
  using SendFn = void (*)(ParkedResponse* parked);
  // The most responses parked at once by default: at 256 streams of 32
  // tokens, every token of every open stream.
  static constexpr size_t kMaxParked = 8192;

  ResponseLane(FrontEndPacer* pacer, SendFn send, size_t max_parked);

  // Whether a response of `stream` (its stream's first when `first`) goes
  // out now: true once the pacer let it (a first response waits for room
  // in the queues if it must); false when it must be parked (Park), as
  // its stream has responses parked, or responses are parked ahead of it,
  // or the pacer would wait.
  bool SendNow(const void* stream, bool first) EXCLUDES(mu_);
  // Parks `parked` behind every parked response; over max_parked, first
  // sends the oldest, waiting for the pacer, until the lane has room.
  void Park(ParkedResponse parked) EXCLUDES(mu_);
  // Sends parked responses in order while the pacer lets them go without
  // waiting; when `wait`, the first may wait for the pacer. Returns how
  // many were sent (0 also when another thread is draining).
  size_t Drain(bool wait) EXCLUDES(mu_);
  // Sends everything parked, waiting for the pacer as it must.
  void DrainAll() EXCLUDES(mu_);
  // Sends every parked response of `stream`, in order and ahead of the
  // others', waiting for the pacer as it must: before its request is
  // released (response_writer.cc).
  void DrainThrough(const void* stream) EXCLUDES(mu_);

  bool empty() const { return parked_count_.load() == 0; }
  size_t parked() const { return parked_count_.load(); }

  // Counters, for the tests and the debug line.
  struct Counters {
    uint64_t parked = 0;     // responses that waited in the lane
    uint64_t overtakes = 0;  // first responses sent while others waited
  };
  Counters counters() EXCLUDES(mu_);

 private:
  FrontEndPacer* const pacer_;
  const SendFn send_;
  const size_t max_parked_;
  // A stream with responses parked or being sent.
  struct Stream {
    std::deque<ParkedResponse> waiting;  // in its order
    size_t sending = 0;                  // taken by a drainer, not sent yet
  };
  // Takes the next parked response in parking order into *out (false:
  // none). Drainer only.
  bool TakeNext(ParkedResponse* out) REQUIRES(mu_);
  // After a taken response of `stream` was sent.
  void Sent(const void* stream, size_t n) REQUIRES(mu_);

  Mutex mu_;
  std::unordered_map<const void*, Stream> streams_ GUARDED_BY(mu_);
  // The stream of each parked response, in parking order; a stream whose
  // responses went out first (DrainThrough) leaves its keys behind, which
  // TakeNext skips.
  std::deque<const void*> order_ GUARDED_BY(mu_);
  Counters counters_ GUARDED_BY(mu_);
  std::atomic<size_t> parked_count_{0};  // responses waiting, read unlocked
  std::atomic<bool> draining_{false};    // one thread sends parked ones
};

}  // namespace tritonpy
