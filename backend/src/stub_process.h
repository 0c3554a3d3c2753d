// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// StubProcess: spawning, waiting for and killing one
// `python -m tritonpy.stub` child. Not thread-safe: the instance serialises
// calls under its own mutex.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "error.h"

namespace tritonpy {

class StubTemplates;

// The opt-in sandbox of a model's stubs (stub-sandbox, docs/hardening.md):
// user, pid, mount and (stub-sandbox-network=none) network namespaces,
// no_new_privs, rlimits, and a Landlock ruleset the stub applies to itself
// (tritonpy/stub/_lifetime.pyx) over a private scratch tmpfs.
struct StubSandbox {
  bool enabled = false;
  // RLIMIT_NPROC inside the stub's user namespace (threads count too).
  uint64_t max_processes = 256;
  // RLIMIT_AS of the stub and what it starts; 0: unlimited.
  uint64_t address_space_bytes = 0;
  // A root server's sandboxed stubs take this real uid (a real root
  // ignores RLIMIT_NPROC); files stay readable as root. A server that is
  // not root runs its stubs as itself.
  uint32_t uid = 65534;
  // stub-sandbox-network=none: a network namespace of the stub's own, with
  // only its loopback; false (host): the server's network.
  bool own_network = true;
  // stub-sandbox-tmp-bytes: the size of the stub's private scratch (a
  // tmpfs on /dev/shm, TMPDIR), the only place it may write by default.
  uint64_t tmp_bytes = 256ull << 20;
  // stub-sandbox-read-paths, stub-sandbox-write-paths: what the operator
  // adds to what a stub may read, and write. The model's own directories
  // are added to read_paths per model (model_state.cc).
  std::vector<std::string> read_paths;
  std::vector<std::string> write_paths;
};

// What runs the stubs of one model: the interpreter, and the environment
// it gets (an execution environment's, see exec_env.h).
struct StubLaunch {
  std::string python;
  // "KEY=VALUE" entries; empty: the server's own environment, unless
  // `env_filtered` (stub-env-allowlist): then exactly these, even none.
  std::vector<std::string> env;
  bool env_filtered = false;
  StubSandbox sandbox;
  // stub-fork: the templates that fork this model's stubs (the
  // backend's), and the modules their template imports first
  // (stub-preload plus the model's stub_preload); nullptr: exec'd.
  StubTemplates* templates = nullptr;
  std::vector<std::string> preload;
  // The model's own template (stub_template.h): when not empty, the JSON
  // its template imports the model with (model_file, model_dir), and the
  // key that names that template (one per ModelState). Empty: the
  // template of the launch's settings. `shared_args`: once the config is
  // final, initialize_shared's args (initialize's without the instance's
  // keys), which the template runs it with before it forks this launch's
  // stub; empty (the auto-complete stub's launch): the model imported is
  // enough.
  std::string model;
  std::string model_key;
  std::string shared_args;
};

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
  // how it ended (DescribeStatus), or "" when there was no child to end.
  std::string EndWithin(int timeout_ms);

  // "exited with status 3", "killed by signal 9 (SIGKILL)".
  static std::string DescribeStatus(int status);

 private:
  // Spawn, forked by `templates` (nullptr: exec'd). *abandoned: the
  // template did not fork it; Spawn then execs it with new descriptors.
  Status SpawnOnce(
      const StubLaunch& launch, const std::string& instance_name,
      StubTemplates* templates, int* backend_fd, bool* abandoned);
  // Reaps the exited child after killing what is left of its group.
  void ReapExited(int* status);

  pid_t pid_ = -1;
  // The write end of the stub's lifeline (Spawn), held until it is reaped.
  int lifeline_ = -1;
  std::string executable_;
};

}  // namespace tritonpy
