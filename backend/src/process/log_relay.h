// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// LogRelay: what sandboxed stubs write to their stdout and stderr, copied
// to the server's, one backend-wide thread for all. A sandboxed stub holds
// the write end of a pipe of its own at descriptors 1 and 2, never the
// server's descriptors themselves: when the server logs to a file, those
// would let model code truncate it, overwrite it anywhere, move its offset
// under the server's own lines, or reserve the disk with fallocate
// (docs/hardening.md). A pipe lets it append, and nothing else.
//
// The copy is a stream of bytes, as the stub wrote them: up to 64 KiB of
// one pipe at a time, each pipe in turn, so that a stub that writes
// without end delays the others' lines by one chunk, not for good. A stub
// whose pipe is full waits in its write, as it would on a slow terminal. A
// pipe ends when every holder of its write end closed it (the stub and
// what it started have exited): what they wrote until then is copied.
//
// Threads: Open from any thread; the copying on the relay's own thread,
// started at the first Open. The destructor copies what is waiting, then
// closes every pipe.
#pragma once

#include <utility>
#include <vector>

#include "util/error.h"
#include "util/mutex.h"
#include "util/worker_thread.h"

namespace tritonpy {

class LogRelay {
 public:
  LogRelay() = default;
  ~LogRelay();
  LogRelay(const LogRelay&) = delete;
  LogRelay& operator=(const LogRelay&) = delete;

  // A pipe whose bytes are copied to `target` (1: stdout, 2: stderr) until
  // its write end is closed everywhere. *write_end (close-on-exec): for the
  // caller to place in the child and close.
  Status Open(int target, int* write_end) EXCLUDES(mu_);

  // Pipes being copied now (for tests).
  size_t open_pipes() const EXCLUDES(mu_);

 private:
  struct Pipe {
    int fd;      // the read end
    int target;  // where its bytes go
  };
  // One round: waits for a pipe to be readable (or for Open), copies a
  // chunk of each that is, drops those that ended.
  bool Step() EXCLUDES(mu_);
  // Copies one chunk of `p`; false once it ended.
  static bool CopyChunk(const Pipe& p);

  mutable Mutex mu_;
  std::vector<Pipe> pipes_ GUARDED_BY(mu_);
  // Written to by Open to end the relay's poll at once: [0] read, [1] write.
  int wake_[2] GUARDED_BY(mu_) = {-1, -1};
  WorkerThread thread_;
};

}  // namespace tritonpy
