// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// ModelState: what every instance of one model shares: names, paths, the
// raw model config JSON handed to the stub. Immutable after Create, except
// the stub kept from auto-complete and the count of instances starting,
// each under a lock of its own: Triton initializes a model's instances in
// parallel (TRITONBACKEND_GetBackendAttribute), so those two are used from
// several of its threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/auto_complete.h"
#include "model/backend_state.h"
#include "process/stub_process.h"
#include "triton_c_api/triton_api.h"
#include "util/error.h"
#include "util/mutex.h"

namespace tritonpy {

class ModelState {
 public:
  // Reads the model's config; when Triton asks for auto-complete, runs the
  // model's auto_complete_config in a stub first, hands the completed
  // config to Triton and keeps that stub for the first instance.
  static Status Create(
      TRITONBACKEND_Model* model, std::unique_ptr<ModelState>* out);
  ~ModelState();  // stops the auto-complete stub if no instance took it

  // Moves the stub that ran auto_complete_config (past HELLO, waiting for
  // INIT) to the caller; false when there is none (left). Thread-safe:
  // instances start in parallel, and the stub goes to the instance it was
  // started for (its command line names it), or to whichever asks first
  // when the completed config has no instance of that name.
  bool TakeAutoCompleteStub(
      const std::string& instance, std::unique_ptr<StubProcess>* process,
      std::shared_ptr<Channel>* channel) EXCLUDES(stub_mu_);

  // Holds one of the model's instance-start-parallelism turns to start an
  // instance, from construction (waiting for one) to destruction.
  class StartTurn {
   public:
    explicit StartTurn(ModelState* model, const std::string& instance);
    ~StartTurn();
    StartTurn(const StartTurn&) = delete;
    StartTurn& operator=(const StartTurn&) = delete;

   private:
    ModelState* const model_;
  };

  TRITONBACKEND_Model* triton_model() const { return model_; }
  const BackendState& backend() const { return *backend_; }
  const std::string& name() const { return name_; }
  uint64_t version() const { return version_; }
  const std::string& repository() const { return repository_; }
  const std::string& version_dir() const { return version_dir_; }
  const std::string& model_file() const { return model_file_; }
  // The directory put on the stub's sys.path: the version directory, or
  // backends/<name> for a Python-based backend.
  const std::string& model_dir() const { return model_dir_; }
  // The interpreter and environment of this model's stubs: the backend's
  // python-executable, or an execution environment's (EXECUTION_ENV_PATH).
  const StubLaunch& stub_launch() const { return stub_launch_; }
  const std::string& config_json() const { return config_json_; }
  int64_t max_batch_size() const { return max_batch_size_; }
  // model_transaction_policy { decoupled: true }.
  bool decoupled() const { return decoupled_; }
  // Model config parameter `max_inflight_batches` (default 128, 4096 for a
  // decoupled model): how many batches an async-execute instance keeps in
  // flight before Execute blocks.
  uint32_t max_inflight_batches() const { return max_inflight_batches_; }
  // Model config parameter `sync_prefetch_batches` (default 16 for a model
  // of one instance without dynamic or sequence batching, else 1): how many
  // batches a sync-execute instance sends ahead of the one its model is
  // executing (past the first, only while those batches hold less than
  // 16 MiB of arena inputs); 0 makes Execute wait for execute() like the
  // official backend.
  uint32_t sync_prefetch_batches() const { return sync_prefetch_batches_; }
  // Model config parameter `execute_timeout_seconds`, else the backend's
  // execute-timeout-seconds; 0: execute is not bounded.
  double execute_timeout_seconds() const { return execute_timeout_seconds_; }

 private:
  friend struct ModelStateTestPeer;  // backend/tests/fuzz_requests.h
  // Gives the model's stubs a template of their own that imports its
  // model file before it forks them, when it has `instances` (its count in
  // the config) of 2 or more; with fewer, names its model file for a
  // shared template to import its opening imports (StubLaunch::learn).
  // Neither for a sandboxed model (stub_template.h). Names the model's
  // lease (StubLaunch::lease) in any case.
  // Called before auto-complete with the count the config has then (the
  // auto-complete stub is then forked from it: the model is imported
  // once), and again once the config is final. The destructor ends that
  // template.
  void UseOwnTemplate(int64_t instances);
  // Once the config is final: the model's own template (if it has one)
  // runs initialize_shared with these args before it forks an instance;
  // the auto-complete stub, forked before, is stopped.
  void ShareInTemplate();
  TRITONBACKEND_Model* model_ = nullptr;
  const BackendState* backend_ = nullptr;
  std::string name_;
  uint64_t version_ = 0;
  std::string repository_;
  std::string version_dir_;
  std::string model_file_;
  std::string model_dir_;
  StubLaunch stub_launch_;
  std::string config_json_;
  int64_t max_batch_size_ = 0;
  bool decoupled_ = false;
  uint32_t max_inflight_batches_ = kDefaultMaxInflightBatches;
  uint32_t sync_prefetch_batches_ = kDefaultSyncPrefetchBatches;
  double execute_timeout_seconds_ = 0;
  Mutex stub_mu_;
  StartedStub auto_complete_stub_ GUARDED_BY(stub_mu_);
  // The instance auto_complete_stub_ was started for, and whether the
  // completed config has an instance of that name.
  std::string auto_complete_instance_ GUARDED_BY(stub_mu_);
  bool auto_complete_instance_exists_ GUARDED_BY(stub_mu_) = false;
  Mutex start_mu_;
  CondVar start_cv_{&start_mu_};
  // Instances between the start and the end of their StartTurn.
  int starting_ GUARDED_BY(start_mu_) = 0;

  // Runs auto_complete_config and applies its result: config_json_ then
  // holds the config Triton has after the completion. `first_instance`:
  // the name Triton gives the model's first instance.
  Status AutoComplete(const std::string& first_instance) EXCLUDES(stub_mu_);

 public:
  static constexpr uint32_t kDefaultMaxInflightBatches = 128;
  // A decoupled batch is in flight until its streams end.
  static constexpr uint32_t kDecoupledMaxInflightBatches = 4096;
  static constexpr uint32_t kDefaultSyncPrefetchBatches = 1;
  // The default for one instance under Triton's default scheduler.
  static constexpr uint32_t kSoloSyncPrefetchBatches = 16;
  // Parses an integer model parameter `name` from `lo` to `hi`. Exposed for
  // unit tests.
  static Status ParseCount(
      const std::string& model, const std::string& name,
      const std::string& value, uint32_t lo, uint32_t hi, uint32_t* out);
};

}  // namespace tritonpy
