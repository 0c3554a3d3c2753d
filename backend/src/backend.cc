// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The TRITONBACKEND entry points. Each one fetches its state object and
// delegates; all logic lives in BackendState, ModelState and InstanceState.
// Each body runs behind an exception barrier (barrier.h): an exception
// becomes the error Triton gets for that call, never std::terminate.

#include <memory>
#include <string>

#include "instance/instance_state.h"
#include "model/backend_state.h"
#include "model/model_state.h"
#include "triton/triton_util.h"
#include "triton_c_api/triton_api.h"
#include "util/barrier.h"

#define TRITONPY_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

tritonpy::Status
CheckApiVersion()
{
  uint32_t major = 0, minor = 0;
  TRITONPY_RETURN_IF_TRITON_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONPY_BACKEND_API_MAJOR ||
      minor < TRITONPY_BACKEND_API_MINOR) {
    return tritonpy::Status::Unsupported(
        "tritonpy: the server's backend API " + std::to_string(major) + "." +
        std::to_string(minor) + " is older than the " +
        std::to_string(TRITONPY_BACKEND_API_MAJOR) + "." +
        std::to_string(TRITONPY_BACKEND_API_MINOR) + " tritonpy needs");
  }
  return tritonpy::Status();
}

// Reads *state only after the call that fills it has returned: passing
// the pointer, not its value, keeps argument evaluation order out of it.
template <typename T>
T*
StateOf(TRITONSERVER_Error* err, void* const* state)
{
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
    return nullptr;
  }
  return static_cast<T*>(*state);
}

}  // namespace

TRITONPY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend)
{
  return tritonpy::ToTriton(tritonpy::Guarded("backend initialize", [&] {
    tritonpy::Status s = CheckApiVersion();
    std::unique_ptr<tritonpy::BackendState> state;
    if (s.ok()) s = tritonpy::BackendState::Create(backend, &state);
    if (s.ok()) {
      s = tritonpy::FromTriton(
          TRITONBACKEND_BackendSetState(backend, state.get()));
    }
    if (s.ok()) state.release();
    return s;
  }));
}

// Instances start in parallel, as the official backend's do, when the
// backend's instance-start-parallelism is above 1: everything
// InstanceState::Create touches is safe under concurrent calls, and the
// model bounds how many start at once. Triton asks after Initialize.
TRITONPY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_GetBackendAttribute(
    TRITONBACKEND_Backend* backend, TRITONBACKEND_BackendAttribute* attributes)
{
  void* vstate = nullptr;
  const auto* state = StateOf<tritonpy::BackendState>(
      TRITONBACKEND_BackendState(backend, &vstate), &vstate);
  const bool parallel =
      state != nullptr && state->settings().instance_start_parallelism > 1;
  return TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading(
      attributes, parallel);
}

TRITONPY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend)
{
  return tritonpy::ToTriton(tritonpy::Guarded("backend finalize", [&] {
    void* vstate = nullptr;
    delete StateOf<tritonpy::BackendState>(
        TRITONBACKEND_BackendState(backend, &vstate), &vstate);
    return tritonpy::Status();
  }));
}

TRITONPY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  return tritonpy::ToTriton(tritonpy::Guarded("model initialize", [&] {
    std::unique_ptr<tritonpy::ModelState> state;
    tritonpy::Status s = tritonpy::ModelState::Create(model, &state);
    if (s.ok()) tritonpy::InjectFault(state->name(), "model-initialize");
    if (s.ok()) {
      s = tritonpy::FromTriton(TRITONBACKEND_ModelSetState(model, state.get()));
    }
    if (s.ok()) state.release();
    return s;
  }));
}

TRITONPY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  return tritonpy::ToTriton(tritonpy::Guarded("model finalize", [&] {
    void* vstate = nullptr;
    delete StateOf<tritonpy::ModelState>(
        TRITONBACKEND_ModelState(model, &vstate), &vstate);
    return tritonpy::Status();
  }));
}

TRITONPY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance)
{
  return tritonpy::ToTriton(tritonpy::Guarded("instance initialize", [&] {
    TRITONBACKEND_Model* model = nullptr;
    void* vmodel = nullptr;
    tritonpy::Status s = tritonpy::FromTriton(
        TRITONBACKEND_ModelInstanceModel(instance, &model));
    if (s.ok())
      s = tritonpy::FromTriton(TRITONBACKEND_ModelState(model, &vmodel));
    std::unique_ptr<tritonpy::InstanceState> state;
    if (s.ok()) {
      s = tritonpy::InstanceState::Create(
          static_cast<tritonpy::ModelState*>(vmodel), instance, &state);
    }
    if (s.ok()) {
      s = tritonpy::FromTriton(
          TRITONBACKEND_ModelInstanceSetState(instance, state.get()));
    }
    if (s.ok()) state.release();
    return s;
  }));
}

TRITONPY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance)
{
  return tritonpy::ToTriton(tritonpy::Guarded("instance finalize", [&] {
    void* vstate = nullptr;
    delete StateOf<tritonpy::InstanceState>(
        TRITONBACKEND_ModelInstanceState(instance, &vstate), &vstate);
    return tritonpy::Status();
  }));
}

TRITONPY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count)
{
  void* vstate = nullptr;
  tritonpy::Status s =
      tritonpy::FromTriton(TRITONBACKEND_ModelInstanceState(instance, &vstate));
  if (!s.ok() || vstate == nullptr) {
    // Nothing taken over yet: Triton keeps the requests.
    return tritonpy::ToTriton(
        s.ok() ? tritonpy::Status::Internal("tritonpy: no instance state") : s);
  }
  // Execute has a barrier of its own: once it is entered the backend owns
  // the requests, so an exception must not give them back to Triton.
  static_cast<tritonpy::InstanceState*>(vstate)->Execute(
      requests, request_count);
  return nullptr;  // every request was answered and released
}

TRITONPY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceReady(TRITONBACKEND_ModelInstance* instance)
{
  return tritonpy::ToTriton(tritonpy::Guarded("instance readiness", [&] {
    void* vstate = nullptr;
    tritonpy::Status s = tritonpy::FromTriton(
        TRITONBACKEND_ModelInstanceState(instance, &vstate));
    if (s.ok() && vstate == nullptr) {
      s = tritonpy::Status::Unavailable("tritonpy: no instance state");
    }
    if (s.ok()) s = static_cast<tritonpy::InstanceState*>(vstate)->CheckReady();
    return s;
  }));
}
