// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// What a test may ask of the stand-in for tritonserver (fake_triton.cc)
// beyond the C API: have TRITONSERVER_ServerInferAsync accept requests
// instead of failing them, and take the accepted requests with the
// callbacks the backend set, to play Triton's side of them (responses,
// request release) from the test's own threads; and run a hook inside
// TRITONSERVER_InferenceRequestDelete, to act while a release callback is
// in the middle of its work.
#pragma once

#include <functional>
#include <vector>

#include "tritonpy/triton_infer_api.h"

namespace fake_triton {

// One request ServerInferAsync accepted, with its callbacks.
struct Started {
  TRITONSERVER_InferenceRequest* request = nullptr;
  TRITONSERVER_InferenceRequestReleaseFn_t release_fn = nullptr;
  void* release_userp = nullptr;
  TRITONSERVER_InferenceResponseCompleteFn_t response_fn = nullptr;
  void* response_userp = nullptr;
};

// false (the default): every inference fails to start.
void AcceptInferences(bool accept);
// The requests accepted since the last call; the caller now plays Triton
// for them (the release callback deletes the request).
std::vector<Started> TakeStarted();
// Runs `hook` (once) in the next TRITONSERVER_InferenceRequestDelete,
// before the request is deleted.
void OnNextRequestDelete(std::function<void()> hook);

}  // namespace fake_triton
