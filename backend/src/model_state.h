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
#include "tritonpy/triton_api.h"

namespace tritonpy {

class ModelState {
 public:
  static Status Create(TRITONBACKEND_Model* model,
                       std::unique_ptr<ModelState>* out);

  TRITONBACKEND_Model* triton_model() const { return model_; }
  const BackendState& backend() const { return *backend_; }
  const std::string& name() const { return name_; }
  uint64_t version() const { return version_; }
  const std::string& repository() const { return repository_; }
  const std::string& version_dir() const { return version_dir_; }
  const std::string& model_file() const { return model_file_; }
  const std::string& config_json() const { return config_json_; }
  int64_t max_batch_size() const { return max_batch_size_; }

 private:
  TRITONBACKEND_Model* model_ = nullptr;
  const BackendState* backend_ = nullptr;
  std::string name_;
  uint64_t version_ = 0;
  std::string repository_;
  std::string version_dir_;
  std::string model_file_;
  std::string config_json_;
  int64_t max_batch_size_ = 0;
};

}  // namespace tritonpy
