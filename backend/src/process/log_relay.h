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
// Lines stay whole: a pipe's bytes are copied up to its last newline,
// the rest kept for its next round (up to 64 KiB: a longer line goes out
// in pieces), so that another stub's line never lands inside one. Each
// pipe in turn, a read of up to 64 KiB each: a stub that writes without
// end delays the others by one chunk, not for good. A stub's stdout and
// stderr are two pipes: their lines keep their order within each, not
// between them. A stub whose pipe is full waits in its write, as it would
// on a slow terminal. A pipe ends when every holder of its write end
// closed it (the stub and what it started have exited): what they wrote
// until then is copied. A server whose stdout is a pipe that closed gets
// EPIPE on the relay's writes, never SIGPIPE.
//
// Threads: Open from any thread; the copying on the relay's own thread,
// started at the first Open. The destructor copies what is waiting, then
// closes every pipe.
#pragma once

#include <atomic>
#include <string>
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
    int fd;               // the read end
    int target;           // where its bytes go
    std::string partial;  // the start of a line not ended yet
  };
  // One round: waits for a pipe to be readable (or for Open), copies a
  // chunk of each that is, drops those that ended.
  bool Step() EXCLUDES(mu_);
  // Copies one chunk of `p`, whole lines; false once it ended (what was
  // kept of it is written then).
  static bool CopyChunk(Pipe* p);

  mutable Mutex mu_;
  // Opened, not yet taken by the relay's thread.
  std::vector<Pipe> added_ GUARDED_BY(mu_);
  // Written to by Open to end the relay's poll at once: [0] read, [1] write.
  int wake_[2] GUARDED_BY(mu_) = {-1, -1};
  // The relay thread's own (the destructor's once it ended).
  std::vector<Pipe> pipes_;
  std::atomic<size_t> open_{0};  // added_ and pipes_
  WorkerThread thread_;
};

}  // namespace tritonpy
