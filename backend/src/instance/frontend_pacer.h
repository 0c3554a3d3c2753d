// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// FrontEndPacer: sends responses no faster than Triton's HTTP front end
// takes them in (issue 32, docs/llm-serving.md "HTTP streams").
//
// Triton's HTTP front end (libevhtp) hands every response, streamed or
// not, to the HTTP thread of its connection with evthr_defer: a 17-byte
// command on a non-blocking AF_UNIX socket pair per thread (SOCK_STREAM in
// 2.51), written by the thread that sends the response (for tritonpy, the
// reader thread). Each command takes an skb's worth (768 bytes on x86-64
// Linux 6) of the socket's send buffer until the HTTP thread reads it;
// when the buffer is full the send fails and Triton (2.51 to 2.73 at
// least) ignores the failure: a token is lost, or a stream's end, which
// leaves the stream open and the server hanging at shutdown. At the
// default net.core.wmem_default (208 KiB) 277 commands fill one; a reader
// thread that writes a RESPONSES frame of hundreds of tokens does that.
//
// The pacer finds those socket pairs in the process (unnamed AF_UNIX
// stream or datagram sockets whose peer is this process; tritonpy's own
// channels are SOCK_SEQPACKET) and keeps a budget of sends that fit in
// the fullest one's free space, at two commands per response (a final
// one defers its chunk and the end).
// While the budget lasts a send costs one atomic decrement; when it runs
// out the pacer measures the queues again (SIOCOUTQ: the bytes queued)
// and, when one is more than a quarter full, waits (poll for POLLOUT,
// which a Unix socket reports at a quarter full) for the HTTP
// thread to drain it. The wait holds no lock (senders that run out
// together each wait, none behind another's wait), and one send waits
// kMaxWaitMs at most in all, however slowly a queue drains. A queue that
// makes no progress for kStallMs (its thread stopped, at shutdown) is
// skipped until it moves again; the full queues are watched together. On
// a front end whose queues never fill (a newer Triton that retries)
// nothing waits; without an HTTP front end no socket matches and nothing
// waits either (the re-scan is rate-limited to once per kRescanMs).
// Another socket pair of the process that matches is harmless unless it
// stays over a quarter full while it moves: sends would then follow its
// pace.
//
// Only read-only calls touch the sockets (fstat, getsockopt, ioctl,
// poll), and a queue is known by its socket, not by its descriptor
// number: before each use the descriptor's (st_dev, st_ino) must still be
// the socket's found by the scan, else the queue is dropped (its number
// was closed, maybe reused by another file) and the next refill scans
// again. Thread-safe; one per process (Get).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "util/mutex.h"

namespace tritonpy {

class FrontEndPacer {
 public:
  // How long a queue may make no progress before it is taken for a
  // stopped thread's and skipped.
  static constexpr int kStallMs = 1000;
  // The longest one send waits for the queues, in all: a queue that made
  // no progress in that time is taken for stopped.
  static constexpr int kMaxWaitMs = kStallMs;
  // How often the process's descriptors are scanned again at most.
  static constexpr int kRescanMs = 1000;
  // Commands one response may queue: a chunk and, when final, the end.
  static constexpr int kCommandsPerResponse = 2;

  static FrontEndPacer& Get();

  // Where the pacer reports the first time it waits (`verbose` false) and
  // each queue it takes for stopped (true); by default nowhere (this code
  // needs no Triton). Set before the first send.
  using LogFn = void (*)(bool verbose, const std::string& message);
  void SetLog(LogFn log) { log_.store(log); }

  // Call before each response (or flags-only final) is sent: returns at
  // once while the budget lasts, else after the queues drained enough.
  void BeforeSend()
  {
    if (budget_.fetch_sub(1, std::memory_order_relaxed) > 0) return;
    Refill();
  }

  // Counters, for the tests and the debug line.
  struct Counters {
    uint64_t refills = 0;  // budgets measured
    uint64_t waits = 0;    // refills that had to wait for a queue
    uint64_t wait_us = 0;  // time spent waiting
    uint64_t stalls = 0;   // queues taken for stopped
    size_t queues = 0;     // sockets watched now
  };
  Counters counters();

  // Watches exactly `fds` from now on instead of scanning (unit tests);
  // an empty list goes back to scanning.
  void WatchForTest(const std::vector<int>& fds);

 private:
  FrontEndPacer();

  struct Queue {
    int fd;
    dev_t dev;  // the socket it was found to be
    ino_t ino;
    int64_t sndbuf;           // the socket's send-buffer limit (bytes)
    int64_t stalled_at = -1;  // its queued bytes when taken for stopped
  };
  // What one wait found of a queue it watched.
  struct Watched {
    Queue queue;        // as found before the wait
    bool gone = false;  // closed, or no longer the same socket
    bool stalled = false;
    int64_t queued = 0;
  };

  void Refill() EXCLUDES(mu_);
  // Re-reads the process's descriptors into queues_.
  void Scan() REQUIRES(mu_);
  // Waits, holding no lock, until each of the `full` queues (copies) has
  // fallen to a quarter of its buffer, gone, or made no progress for
  // kStallMs, and kMaxWaitMs at most.
  std::vector<Watched> WaitForRoom(const std::vector<Queue>& full)
      EXCLUDES(mu_);
  // Marks the queues a wait found stalled or gone.
  void Apply(const std::vector<Watched>& watched) REQUIRES(mu_);
  // Measures each queue once (dropping those gone) and returns the room
  // the fullest leaves; with `full`, also takes a queue that moved off
  // its stall for live again and appends those over a quarter full.
  int64_t MeasureRoom(std::vector<Queue>* full) REQUIRES(mu_);
  // The budget `room` bytes allow (INT64_MAX: no queue to pace against).
  void SetBudget(int64_t room) REQUIRES(mu_);

  std::atomic<int64_t> budget_{0};
  Mutex mu_;
  std::vector<Queue> queues_ GUARDED_BY(mu_);
  bool fixed_ GUARDED_BY(mu_) = false;  // WatchForTest
  std::chrono::steady_clock::time_point last_scan_ GUARDED_BY(mu_);
  bool scanned_ GUARDED_BY(mu_) = false;
  // The bytes one command takes of a send buffer (its skb), measured once
  // on socket pairs of our own.
  const int64_t command_cost_;
  Counters counters_ GUARDED_BY(mu_);
  std::atomic<LogFn> log_{nullptr};
};

}  // namespace tritonpy
