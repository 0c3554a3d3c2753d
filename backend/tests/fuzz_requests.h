// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Triton requests of any content, described by a fuzz input, for the
// targets that hand requests to the backend (fuzz_execute.cc,
// fuzz_sequence.cc): ids and correlation ids of any bytes and lengths
// past MAX_FRAME, flags, timeouts, parameters of every type, requested
// outputs, and inputs of any name, known datatype, shape (dims whose byte
// size wraps at 2^64 among them), declared byte size and buffers around
// the inline and frame limits, now and then "in GPU memory".
#pragma once

#include <cstdint>
#include <memory>

#include "fake_triton.h"
#include "fuzz_input.h"
#include "model/model_state.h"

namespace tritonpy {

// Makes models with what BuildExecute and BatchTable read of one
// (model_state.h names it friend). They are never destroyed: the
// destructor, which stops an auto-complete stub, is one that aborts here.
struct ModelStateTestPeer {
  static ModelState* Make(int64_t max_batch_size, bool decoupled);
};

namespace fuzz {

std::unique_ptr<TRITONBACKEND_Request> MakeRequest(FuzzInput* in);

}  // namespace fuzz
}  // namespace tritonpy
