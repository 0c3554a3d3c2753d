// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The settings a model's stubs are started with: the interpreter, the
// environment, the sandbox, the templates. A leaf: what starts children
// (child_launch.h, stub_process.h, stub_template.h) and what fills these
// in (model_state.cc, exec_env.cc) include it, and it includes none of
// them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tritonpy {

class LogRelay;
class StubTemplates;

// The opt-in sandbox of a model's stubs (stub-sandbox, docs/hardening.md):
// user, pid, mount, IPC and (stub-sandbox-network=none) network namespaces,
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
  // A sandboxed stub's stdout and stderr: pipes this copies to the
  // server's (log_relay.h), never the server's own descriptors.
  LogRelay* log_relay = nullptr;
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
  // Names the loaded model (one per ModelState) whose stubs or own
  // template fork from a template of opening imports, or of settings of
  // the model's own (`own_settings`): that template runs while a loaded
  // model uses it (StubTemplates::Forget).
  std::string lease;
  // The model's own settings give its stubs a template that the
  // backend's settings alone would not: its stub_preload, an execution
  // environment, or a sandbox of its own. Templates of the backend's
  // settings run until the backend ends.
  bool own_settings = false;
  // A model not sandboxed: the JSON of its model file (model_file,
  // model_dir, and the model's name), whose opening imports of installed
  // packages are imported first by the template its stubs fork from (one
  // instance), or its own template forks from (StubTemplates::Fork);
  // empty: none.
  std::string learn;
  // The opening imports a template imports after `preload`, as a model's
  // stub would (template.py --opening); set by StubTemplates only.
  std::vector<std::string> opening;
};

}  // namespace tritonpy
