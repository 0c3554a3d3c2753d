// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Exception barriers. Every place where Triton or a thread of our own
// enters backend code (the TRITONBACKEND_* entry points, the reader loop,
// the drain watcher, the BLS callbacks, the model-control worker) runs its
// body through Guarded, so that an exception (std::bad_alloc from an
// allocation a stub asked for, std::system_error from a thread or a mutex)
// becomes an error of that model or stub, never std::terminate: the server
// and every other model serve on. docs/hardening.md, "Exception barriers
// and sends".
#pragma once

#include <string>

#include "util/error.h"

namespace tritonpy {

// What the exception in flight is: "out of memory (std::bad_alloc)",
// "<what()> (std::system_error)", ... Call only from a catch block. Never
// throws: when even the text cannot be built, it is empty.
std::string DescribeCurrentException() noexcept;

// Runs `body` (returning Status) and turns an exception it throws into
// Status::Internal("tritonpy: <where>: <what happened>").
template <typename Body>
Status
Guarded(const char* where, Body&& body) noexcept
{
  try {
    return body();
  } catch (...) {
    try {
      return Status::Internal(
          std::string("tritonpy: ") + where + ": " +
          DescribeCurrentException());
    } catch (...) {
      return Status::Internal(std::string());
    }
  }
}

// Test hook: throws std::bad_alloc at `point` of `model` when the server's
// environment has TRITONPY_TEST_FAULT="<model>:<point>[,<model>:<point>...]".
// The points are named where they are called (docs/hardening.md). Costs a
// load and a branch when the variable is unset.
void InjectFault(const std::string& model, const char* point);

}  // namespace tritonpy
