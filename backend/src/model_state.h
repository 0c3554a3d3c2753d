// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// ModelState: what every instance of one model shares: names, paths, the
// raw model config JSON handed to the stub. Immutable after Create.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend_state.h"
#include "error.h"
#include "stub_process.h"
#include "tritonpy/triton_api.h"

namespace tritonpy {

class ModelState {
 public:
  static Status Create(
      TRITONBACKEND_Model* model, std::unique_ptr<ModelState>* out);

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
  // Model config parameter `max_inflight_batches` (default 128): how many
  // batches an async-execute instance keeps in flight before Execute blocks.
  uint32_t max_inflight_batches() const { return max_inflight_batches_; }
  // Model config parameter `sync_prefetch_batches` (default 1): how many
  // batches a sync-execute instance sends ahead of the one its model is
  // executing; 0 makes Execute wait for execute() like the official backend.
  uint32_t sync_prefetch_batches() const { return sync_prefetch_batches_; }
  // Model config parameter `execute_timeout_seconds`, else the backend's
  // execute-timeout-seconds; 0: execute is not bounded.
  double execute_timeout_seconds() const { return execute_timeout_seconds_; }

 private:
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

 public:
  static constexpr uint32_t kDefaultMaxInflightBatches = 128;
  static constexpr uint32_t kDefaultSyncPrefetchBatches = 1;
  // Parses an integer model parameter `name` from `lo` to `hi`. Exposed for
  // unit tests.
  static Status ParseCount(
      const std::string& model, const std::string& name,
      const std::string& value, uint32_t lo, uint32_t hi, uint32_t* out);
};

}  // namespace tritonpy
