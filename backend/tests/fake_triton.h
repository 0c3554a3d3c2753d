// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The requests of the stand-in for tritonserver (fake_triton.cc): a fuzz
// target fills them in, the backend reads them through the
// TRITONBACKEND_Request* and TRITONBACKEND_Input* calls, as it reads
// Triton's. Every buffer is a heap block of exactly its size, so that ASan
// sees a read past it.
//
// And what a test may ask of it beyond the C API: have
// TRITONSERVER_ServerInferAsync hand the requests it accepts to the test
// instead of keeping them for FakeTritonCompletePending, and take them with
// the callbacks the backend set, to play Triton's side of them (responses,
// request release) from the test's own threads; and run a hook inside
// TRITONSERVER_InferenceRequestDelete, to act while a release callback is
// in the middle of its work.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "triton_c_api/triton_api.h"
#include "triton_c_api/triton_infer_api.h"

struct TRITONBACKEND_Input {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_UINT8;
  std::vector<int64_t> shape;
  uint64_t byte_size = 0;  // as Triton would say it: may disagree
  std::vector<std::vector<uint8_t>> buffers;
  bool gpu = false;  // the buffers say they are in GPU memory
};

// One request parameter; `value` points into the record.
struct FakeParameter {
  std::string key;
  TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
  std::string text;
  int64_t integer = 0;
  bool boolean = false;
  double real = 0;
};

struct TRITONBACKEND_Request {
  std::string id;
  bool correlation_is_string = false;
  uint64_t correlation = 0;
  std::string correlation_string;
  uint32_t flags = 0;
  uint64_t timeout_us = 0;
  std::vector<FakeParameter> parameters;
  std::vector<std::string> outputs;
  std::vector<std::unique_ptr<TRITONBACKEND_Input>> inputs;
  bool cancelled = false;  // the client cancelled it
  // What the backend did with it.
  int responses = 0;        // responses sent
  int error_responses = 0;  // of them, with an error
  int final_flags = 0;      // sends that carried COMPLETE_FINAL
  int releases = 0;
  uint32_t release_flags = 0;  // of the last release
  int sends_after_final = 0;   // responses or flags sent after a FINAL
  std::string last_error;      // the message of the last error response
};

struct TRITONBACKEND_ResponseFactory {
  TRITONBACKEND_Request* request = nullptr;
};

// Answers every inference request ServerInferAsync took since the last
// call (BLS): responses with outputs in buffers of the request's allocator,
// or errors, then the final flag and the request's release, as `script`
// says. Returns the response callbacks made.
uint64_t FakeTritonCompletePending(const uint8_t* script, size_t len);

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
// How many times TRITONSERVER_MetricSet was called, by any thread.
uint64_t MetricSets();

}  // namespace fake_triton
