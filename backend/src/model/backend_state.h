// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// BackendState: the backend-wide settings, read once in
// TRITONBACKEND_Initialize from `tritonpy.conf` in the backend directory
// and from `--backend-config=<name>,key=value` (which wins). Immutable
// after creation, so it is read from any thread without locking.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ipc/arena.h"
#include "model/drain_watcher.h"
#include "process/log_relay.h"
#include "process/memory_reporter.h"
#include "process/stub_launch.h"
#include "process/stub_template.h"
#include "triton/metrics.h"
#include "triton_c_api/triton_api.h"
#include "util/error.h"

namespace tritonpy {

class SandboxedModels;  // bls/model_control.h

struct BackendSettings {
  std::string python_executable = "python3";
  int stub_timeout_seconds = 30;
  uint64_t arena_byte_size = 64ull << 20;
  // 0: an unload or a shutdown leaves work in flight alone, as the
  // official backend does (Triton keeps the instance while its requests
  // live; its exit timeout bounds a shutdown). More than 0: such work gets
  // this long, then the stub cancels it and answers its requests (passed
  // to the stub as settings.finalize_grace_seconds, which also bounds what
  // is left at FINALIZE). Fractions are allowed ("0.5").
  double finalize_grace_seconds = 0;
  // How long a readiness query waits for the model's is_ready().
  double ready_timeout_seconds = 5;
  // A batch whose execute runs longer than this gets its stub killed and
  // restarted (its requests fail naming the timeout). 0: no limit. A model
  // parameter `execute_timeout_seconds` overrides it per model.
  double execute_timeout_seconds = 0;
  // Stub deaths in a row, each within 5 s of its start and before it
  // answered anything (or failed restarts), after which the instance stops
  // restarting and stays unavailable, requests failing with the reason,
  // until the model is loaded again. 0: restart forever.
  int stub_restart_limit = 5;
  // Where execution environment archives (EXECUTION_ENV_PATH) are unpacked;
  // empty: the default of tritonpy.exec_env (~/.cache/tritonpy/envs).
  std::string env_cache_dir;
  // What each stub may make the backend map or decode: stub-max-arenas,
  // stub-max-arena-bytes, stub-max-body-bytes.
  StubLimits stub_limits;
  // What unpacking one EXECUTION_ENV_PATH archive may cost (0: no limit):
  // bytes of decompressed tar stream, members, and decompressed bytes per
  // archive byte (counted beyond 64 MiB). Passing one fails the load.
  uint64_t env_unpack_max_bytes = 32ull << 30;
  uint64_t env_unpack_max_members = 1000000;
  uint64_t env_unpack_max_ratio = 100;
  // Exception barriers and sends (docs/hardening.md).
  // Bytes of frames that may wait for a stub that does not read its
  // socket (beyond the socket's own buffer) before it is killed.
  uint64_t stub_send_queue_bytes = 32ull << 20;
  // Whether models may load and unload models (pb_utils.load_model and
  // friends, MODEL_CONTROL).
  bool model_control = true;
  // stub-sandbox-model-control: whether sandboxed stubs may use the model
  // loading API (model_control.h, SandboxedControl).
  bool sandbox_model_control = false;
  // The stubs' sandbox and process limits (kSandboxKeys: stub-sandbox and
  // the keys after it; per model: parameter stub_sandbox and friends).
  // docs/hardening.md.
  StubSandbox sandbox;
  // stub-env-allowlist: names (NAME, or PREFIX* for a prefix) of the
  // server's environment variables a stub gets; empty: all of them.
  std::vector<std::string> env_allowlist;
  // stub-python-logging: records of Python's logging module that no
  // handler takes go to Triton's log (stub/pylogging.py); false: to the
  // stub's stderr, as on the official backend.
  bool python_logging = true;
  // metric-max-families, metric-max-series: what the custom metrics of one
  // model may make the server hold (MetricStore, docs/hardening.md).
  uint64_t metric_max_families = 1000;
  uint64_t metric_max_series = 10000;
  // stub-fork: stubs are forked from a template that imported the stub and
  // stub-preload once (stub_template.h); false: each execs a fresh
  // interpreter. stub-preload: the modules the template imports (a model's
  // parameter stub_preload adds to them, with a template of its own).
  bool stub_fork = true;
  std::vector<std::string> stub_preload = {"numpy"};
  // stub-memory-interval-seconds: how often each stub's PSS and private
  // memory are read for its metrics (MemoryReporter); 0: never.
  double stub_memory_interval_seconds = 30;
  // instance-start-parallelism: how many instances of one model may start
  // (stub start and initialize()) at once. Above 1, Triton asks for all of
  // them at once (TRITONBACKEND_GetBackendAttribute) and the others wait
  // for a turn; 1: one by one. Its default follows the machine
  // (SetStartDefault).
  int instance_start_parallelism = 1;
};

// Whether environment variable `name` is on stub-env-allowlist.
bool EnvAllowed(
    const std::vector<std::string>& allowlist, const std::string& name);

// One value of the stubs' sandbox: its backend setting, and the model
// parameter that overrides it per model (nullptr: the backend's alone).
// `parse` reads `text`, given under `name` (either spelling), into
// `sandbox`; its errors name `name`. A value out of bounds fails with
// `bound_prefix` + "<name> must ...": the backend passes "tritonpy: ",
// a model "" (its own prefix goes before the whole message).
struct SandboxKey {
  const char* setting;
  const char* parameter;
  Status (*parse)(
      const std::string& name, const std::string& text,
      const std::string& bound_prefix, StubSandbox* sandbox);
};
extern const std::array<SandboxKey, 8> kSandboxKeys;

class BackendState {
 public:
  static Status Create(
      TRITONBACKEND_Backend* backend, std::unique_ptr<BackendState>* out);

  const BackendSettings& settings() const { return settings_; }
  // Internally synchronised: usable through a const BackendState.
  DrainWatcher& drain_watcher() const { return *drain_watcher_; }
  // Internally synchronised, like drain_watcher().
  MetricStore& metric_store() const { return *metric_store_; }
  // Internally synchronised: where stubs (and anything else the backend
  // runs, such as a stub template) register their processes for the
  // memory metrics (memory_reporter.h).
  MemoryReporter& memory_reporter() const { return *memory_reporter_; }
  const std::string& name() const { return name_; }
  // The stub templates of this backend's models (stub-fork); nullptr with
  // stub-fork=false. Internally synchronised.
  StubTemplates* templates() const { return templates_.get(); }
  // Where sandboxed stubs' stdout and stderr are copied to the server's
  // (log_relay.h). Internally synchronised.
  LogRelay* log_relay() const { return log_relay_.get(); }
  // The models sandboxed models loaded (model_control.h): what each may
  // load again and unload. Internally synchronised.
  const std::shared_ptr<SandboxedModels>& sandboxed_models() const
  {
    return sandboxed_models_;
  }
  // The backend's directory (TRITONBACKEND_BackendArtifacts): for a
  // Python-based backend, backends/<name>, which holds its model.py.
  const std::string& directory() const { return directory_; }

  // Applies key/value pairs (file first, then command line) to `settings`,
  // logging ignored or unknown keys. Exposed for unit tests.
  static Status ApplySettings(
      const std::map<std::string, std::string>& kv, const std::string& origin,
      BackendSettings* settings, bool log);
  // Parses a duration: digits with an optional fraction, 0 to 86400
  // seconds; the error names `key`.
  static Status ParseSeconds(
      const std::string& key, const std::string& value, double* out);
  // "true"/"false" (also 1/0, yes/no, on/off); the error names `key`.
  static Status ParseFlag(
      const std::string& key, const std::string& value, bool* out);
  // The defaults of stub-max-arena-bytes (`usable`) and stub-max-bls-bytes
  // (a quarter of it) for a server that may use `usable` bytes of memory
  // (machine_memory.h; 0: unknown, the fixed defaults stand).
  static void SetMemoryDefaults(uint64_t usable, StubLimits* limits);
  // The default of instance-start-parallelism for a server that may run on
  // `cpus` CPUs and use `usable` bytes of memory (0: unknown): four starts
  // per CPU, one per GiB, 16 at most, 1 at least.
  static int StartDefault(int cpus, uint64_t usable);
  // Parses `value`, module names separated by commas (stub-preload, the
  // model parameter stub_preload), adding the new ones to *modules; the
  // error names `key`.
  static Status ParseModules(
      const std::string& key, const std::string& value,
      std::vector<std::string>* modules);
  // Parses the `key=value` lines of tritonpy.conf (`#` starts a comment).
  static Status ParseConfFile(
      const std::string& text, std::map<std::string, std::string>* out);

 private:
  std::string name_;
  std::string directory_;
  BackendSettings settings_;
  // Before everything that starts stubs: it goes last, once they ended.
  std::unique_ptr<LogRelay> log_relay_ = std::make_unique<LogRelay>();
  std::unique_ptr<DrainWatcher> drain_watcher_ =
      std::make_unique<DrainWatcher>();
  std::unique_ptr<MetricStore> metric_store_ = std::make_unique<MetricStore>();
  // After the store, so that it goes first: it holds series of the store.
  std::unique_ptr<MemoryReporter> memory_reporter_;
  std::unique_ptr<StubTemplates> templates_;
  std::shared_ptr<SandboxedModels> sandboxed_models_;
};

}  // namespace tritonpy
