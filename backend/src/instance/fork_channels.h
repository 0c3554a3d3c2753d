// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// BLS from processes a stub forks (docs/protocol.md, "BLS_CHANNEL"): a
// model that maps work over a multiprocessing pool inside execute() has
// each child call exec(). A child cannot share the stub's socket (its
// answers would be read by whichever process reads first, and its call ids
// collide with the stub's), so it makes a socket pair of its own and sends
// one end in a BLS_CHANNEL frame over the stub's socket. Each such channel
// gets here a reader thread of its own, the child's own arenas
// (PeerArenas) and its own Bls: call ids and BLS arenas are the
// channel's, as if it were one more stub of the instance. The caps are
// not multiplied: the children's BLS calls and bytes count with the
// stub's, their arenas together (StubUsage); their model loading requests
// go to the instance's one model-control worker.
//
// When the child closes its end (it exited), its reader cancels its calls
// in flight and frees what it held. When the stub goes away, every channel
// of it is shut down too: the children of a dead stub have nobody to serve
// them.
//
// Threads: Open, ShutdownAll, ReapEnded and CloseAll on the instance's
// reader thread (CloseAll also from ~ForkChannels, on the thread that
// deletes the instance, once the reader was joined); each channel's frames
// on that channel's own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bls/bls.h"
#include "ipc/arena.h"
#include "util/error.h"
#include "util/worker_thread.h"

namespace tritonpy {

class ForkChannels {
 public:
  // What every child's Bls is made with: the instance's own settings.
  struct Settings {
    TRITONSERVER_Server* server = nullptr;
    std::string describe;  // "model 'm' instance 'i'"
    uint64_t arena_byte_size = 0;
    bool model_control = false;
    StubLimits limits;
    uint64_t send_queue_bytes = 0;
    std::shared_ptr<ArenaRoom> room;
    SandboxedControl sandboxed;
    // The caps' count the stub's own Bls shares (StubUsage): the children
    // add their BLS calls and bytes to the stub's, and their arenas up.
    std::shared_ptr<StubUsage> usage;
    // The stub's Bls, whose model-control worker serves the children too.
    Bls* stub_bls = nullptr;
  };

  // Channels of one stub open at once; past it a new one is closed at once
  // (the child's calls fail: the connection closed) and a warning logged.
  // Channels whose child closed its end do not count, read to their end
  // or not.
  static constexpr size_t kMaxChannels = 64;

  explicit ForkChannels(Settings settings);
  ~ForkChannels();  // CloseAll
  ForkChannels(const ForkChannels&) = delete;
  ForkChannels& operator=(const ForkChannels&) = delete;

  // Reader thread: a BLS_CHANNEL frame carried `fd` (an AF_UNIX
  // SOCK_SEQPACKET socket, checked by the caller); takes it.
  void Open(int fd);

  // Reader thread, when the stub is gone: shuts every channel down (their
  // children see the end at once) without waiting for their threads.
  void ShutdownAll();
  // Reader thread, when the stub is gone (after ShutdownAll, once its
  // requests failed and a new stub started), and the instance's deleting
  // thread: shuts every channel down and returns once their threads ended
  // (each waits, bounded, for Triton to give its cancelled calls back).
  void CloseAll();
  // Reader thread, at idle: joins the threads of channels whose child went
  // away, which hold their descriptors until then.
  void ReapEnded() { Reap(false); }

  // Channels open now (tests and debug counters).
  size_t open() const { return open_.load(); }

 private:
  class Side;
  // Joins the threads of channels whose child went away: those that saw
  // the end, and with `all_closed` also those whose child closed its end
  // (their threads read what is left, then end).
  void Reap(bool all_closed);

  const Settings settings_;
  std::vector<std::unique_ptr<Side>> sides_;  // reader thread only
  uint64_t opened_ = 0;                       // numbers the channels
  uint64_t refused_ = 0;                      // logged at 1, 2, 4, 8, ...
  std::atomic<size_t> open_{0};
};

}  // namespace tritonpy
