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
#include <map>
#include <memory>
#include <string>

#include "ipc/channel.h"
#include "triton_c_api/triton_infer_api.h"
#include "util/error.h"
#include "util/json.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace tritonpy {

// The models sandboxed models loaded with a config of their own, and which
// model loaded each: the only models a sandboxed model may load again or
// unload. Backend-wide; any thread.
class SandboxedModels {
 public:
  // The model that loaded `name`; "" if no sandboxed model did.
  std::string LoadedBy(const std::string& name) EXCLUDES(mu_);
  void Loaded(const std::string& name, const std::string& by) EXCLUDES(mu_);

 private:
  Mutex mu_;
  std::map<std::string, std::string> loaded_by_ GUARDED_BY(mu_);
};

// The model loading API of a sandboxed stub (docs/hardening.md): refused
// unless the operator turns it on (stub-sandbox-model-control); then a
// model may load only models of its own, which stay sandboxed, and
// unload only those (CheckSandboxedLoad, CheckSandboxedUnload).
struct SandboxedControl {
  bool sandboxed = false;                   // the stub asking is sandboxed
  bool allowed = false;                     // stub-sandbox-model-control
  bool backend_sandboxed = false;           // the backend's own stub-sandbox
  std::string backend;                      // this backend's name
  std::string model;                        // the model asking
  std::shared_ptr<SandboxedModels> models;  // the backend's; may be null
};

// For a sandboxed stub with stub-sandbox-model-control=true: a load is
// refused unless it gives a `config` naming this backend (whose
// stub-sandbox is true, so that the model it loads runs sandboxed), and
// unless `name` is its own: a model it loaded before, or a name that is
// neither loaded, nor in the model repository, nor another sandboxed
// model's (no code of its own under another model's name).
Status CheckSandboxedLoad(
    TRITONSERVER_Server* server, const SandboxedControl& policy,
    const std::string& name, const std::string& config);
// Same stub: an unload is refused unless this model loaded `name`.
Status CheckSandboxedUnload(
    const SandboxedControl& policy, const std::string& name);

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
