// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// StubProcess: spawning, waiting for and killing one
// `python -m tritonpy.stub` child. Not thread-safe: the instance serialises
// calls under its own mutex.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "error.h"

namespace tritonpy {

// What runs the stubs of one model: the interpreter, and the environment
// it gets (an execution environment's, see exec_env.h).
struct StubLaunch {
  std::string python;
  // "KEY=VALUE" entries; empty: the server's own environment.
  std::vector<std::string> env;
};

class StubProcess {
 public:
  StubProcess() = default;
  ~StubProcess();  // SIGKILLs and reaps a child still running
  StubProcess(const StubProcess&) = delete;
  StubProcess& operator=(const StubProcess&) = delete;

  // Creates a socketpair, forks and execs
  //   <launch.python> -m tritonpy.stub --fd 3 --instance <instance_name>
  // with the child's end of the socket as fd 3 and every other descriptor
  // above 2 closed. Returns the backend's end (close-on-exec) in
  // *backend_fd.
  Status Spawn(
      const StubLaunch& launch, const std::string& instance_name,
      int* backend_fd);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  const std::string& executable() const { return executable_; }

  // Waits up to timeout_ms for the child to exit; returns true and sets
  // *status (waitpid status) when it has been reaped.
  bool WaitFor(int timeout_ms, int* status);
  // SIGKILLs the child (if not yet reaped) and reaps it.
  int KillAndReap();
  // A child still running gets timeout_ms to exit, then SIGKILL; returns
  // how it ended (DescribeStatus), or "" when there was no child to end.
  std::string EndWithin(int timeout_ms);

  // "exited with status 3", "killed by signal 9 (SIGKILL)".
  static std::string DescribeStatus(int status);

 private:
  pid_t pid_ = -1;
  std::string executable_;
};

// Runs args[0] (looked up in PATH when it has no '/') with the server's
// environment and descriptors 0-2 only, collects what it writes to stdout
// and stderr, and waits for it to exit (no time limit: for helpers such as
// `python -m tritonpy.exec_env`). *wait_status is its waitpid status.
Status RunCommand(
    const std::vector<std::string>& args, std::string* out, std::string* err,
    int* wait_status);

}  // namespace tritonpy
