// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// StubProcess: spawning, waiting for and killing one
// `python -m tritonpy.stub` child. Not thread-safe: the instance serialises
// calls under its own mutex.
#pragma once

#include <sys/types.h>

#include <string>

#include "process/stub_launch.h"
#include "util/error.h"

namespace tritonpy {

class StubProcess {
 public:
  StubProcess() = default;
  ~StubProcess();  // SIGKILLs and reaps a child still running
  StubProcess(const StubProcess&) = delete;
  StubProcess& operator=(const StubProcess&) = delete;

  // Creates a socketpair, forks and execs
  //   <launch.python> -m tritonpy.stub --fd 3 --instance <instance_name>
  //       [--server-lifeline 4]
  // with the child's end of the socket as fd 3, the read end of a pipe of
  // its own that hangs up when this server ends as fd 4 (never a descriptor
  // that reaches the server itself) and every other descriptor above 2 closed.
  // The child leads a process group of its own (killed as a whole when the
  // stub ends) and has PR_SET_PDEATHSIG SIGKILL until the stub watches its
  // lifeline itself. With launch.sandbox.enabled it starts in new
  // user, pid and mount namespaces (docs/hardening.md); a step the kernel
  // refuses fails the spawn with a message naming it. With
  // launch.templates, the child is forked from a stub template instead
  // (stub_template.h), and is otherwise the same; exec'd, with a socket
  // and a lifeline of its own, when the template does not fork it. Returns the
  // backend's end (close-on-exec) in *backend_fd.
  Status Spawn(
      const StubLaunch& launch, const std::string& instance_name,
      int* backend_fd);

  // The stub is up (its handshake done): a sandboxed stub forked from a
  // template has the template make the next one's spare
  // (StubTemplates::MakeSpare).
  void Started();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  const std::string& executable() const { return executable_; }

  // Waits up to timeout_ms for the child to exit; returns true and sets
  // *status (waitpid status) when it has been reaped. Whatever is left in
  // its process group is SIGKILLed before the reap (the group's id cannot
  // be reused until then).
  bool WaitFor(int timeout_ms, int* status);
  // SIGKILLs the child's process group (if not yet reaped) and reaps it.
  int KillAndReap();
  // A child still running gets timeout_ms to exit, then SIGKILL; returns
  // how it ended (DescribeWaitStatus), or "" when there was no child to end.
  std::string EndWithin(int timeout_ms);

 private:
  // Spawn, forked by `templates` (nullptr: exec'd). *abandoned: the
  // template did not fork it; Spawn then execs it with new descriptors.
  Status SpawnOnce(
      const StubLaunch& launch, const std::string& instance_name,
      StubTemplates* templates, int* backend_fd, bool* abandoned);
  // Reaps the exited child after killing what is left of its group.
  void ReapExited(int* status);

  pid_t pid_ = -1;
  // The templates that forked this sandboxed stub, and its launch, until
  // Started (nullptr: none to tell).
  StubTemplates* spare_templates_ = nullptr;
  StubLaunch spare_launch_;
  // The write end of the stub's lifeline (Spawn), held until it is reaped.
  int lifeline_ = -1;
  std::string executable_;
};

}  // namespace tritonpy
