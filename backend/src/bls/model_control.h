// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The model loading API, backend side (docs/protocol.md, "MODEL_CONTROL"):
// a stub's MODEL_CONTROL requests (load, unload, is_ready) run on one
// worker thread per instance, one at a time, so that a slow load never
// stalls the reader thread and a stub cannot make the backend start
// threads at will. Each is answered with MODEL_CONTROL_DONE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "ipc/channel.h"
#include "triton_c_api/triton_infer_api.h"
#include "util/error.h"
#include "util/json.h"
#include "util/mutex.h"

namespace tritonpy {

// The model loading API of a sandboxed stub (docs/hardening.md): refused
// unless the operator turns it on (stub-sandbox-model-control); then a
// load must keep the new model sandboxed and leave other models' code
// alone (CheckSandboxedLoad).
struct SandboxedControl {
  bool sandboxed = false;          // the stub asking is sandboxed
  bool allowed = false;            // stub-sandbox-model-control
  bool backend_sandboxed = false;  // the backend's own stub-sandbox
  std::string backend;             // this backend's name
};

// For a sandboxed stub with stub-sandbox-model-control=true: a load is
// refused unless its `config` names this backend (whose stub-sandbox
// is true, so that the model it loads runs sandboxed), and unless the
// name is free (no config or files in place of a loaded model's).
Status CheckSandboxedLoad(
    TRITONSERVER_Server* server, const SandboxedControl& policy,
    const std::string& name, const std::string& config);

// Runs one MODEL_CONTROL operation ("load", "unload", "is_ready") and
// returns the MODEL_CONTROL_DONE body: {"ok", "error", "ready"}.
// `policy`: that of a sandboxed stub's requests.
json::Value RunModelControl(
    TRITONSERVER_Server* server, const json::Value& msg,
    const SandboxedControl& policy = SandboxedControl());

// The MODEL_CONTROL_DONE body of a failed request: {"ok": false, "error":
// `message` (clipped to fit a frame), "ready": false}.
json::Value ModelControlError(const std::string& message);

// Sends MODEL_CONTROL_DONE for request `id` with `reply` as its body.
Status SendModelControlDone(
    Channel* channel, uint64_t id, const json::Value& reply);

class ModelControlWorker {
 public:
  // Requests one stub may have waiting or running; past this the stub is
  // killed (docs/hardening.md).
  static constexpr size_t kMaxInFlight = 64;

  // `describe` names the model and instance in logged errors.
  // `policy`: what a sandboxed stub may load (SandboxedControl).
  ModelControlWorker(
      TRITONSERVER_Server* server, std::string describe,
      SandboxedControl policy = SandboxedControl());
  // Stop().
  ~ModelControlWorker();
  ModelControlWorker(const ModelControlWorker&) = delete;
  ModelControlWorker& operator=(const ModelControlWorker&) = delete;

  // Reader thread. Queues request `id` of the stub behind `channel`,
  // starting the worker with the first one. A failed Status: the stub has
  // kMaxInFlight requests waiting or running (a protocol violation).
  Status Submit(
      std::shared_ptr<Channel> channel, uint64_t id,
      std::shared_ptr<json::Value> msg);
  // Drops the requests not started yet (the stub that sent them is gone).
  void DropPending();
  // Drops the requests not started yet and joins the worker. A load run by
  // the worker itself may end with this instance's destruction: then the
  // worker is let finish on its own.
  void Stop();

 private:
  // What the worker thread keeps alive, as it may outlive this object.
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace tritonpy
