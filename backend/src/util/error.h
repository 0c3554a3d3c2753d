// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Status: the one error type used inside the backend. A default-constructed
// Status is OK. It is turned into a TRITONSERVER_Error* only at the C API
// boundary (see triton_util.h), so this header links without Triton.
#pragma once

#include <string>
#include <utility>

#include "triton_c_api/triton_api.h"

namespace tritonpy {

class Status {
 public:
  Status() = default;

  static Status Error(TRITONSERVER_Error_Code code, std::string message)
  {
    return Status(code, std::move(message));
  }
  static Status Internal(std::string message)
  {
    return Status(TRITONSERVER_ERROR_INTERNAL, std::move(message));
  }
  static Status InvalidArg(std::string message)
  {
    return Status(TRITONSERVER_ERROR_INVALID_ARG, std::move(message));
  }
  static Status Unavailable(std::string message)
  {
    return Status(TRITONSERVER_ERROR_UNAVAILABLE, std::move(message));
  }
  static Status Unsupported(std::string message)
  {
    return Status(TRITONSERVER_ERROR_UNSUPPORTED, std::move(message));
  }
  static Status NotFound(std::string message)
  {
    return Status(TRITONSERVER_ERROR_NOT_FOUND, std::move(message));
  }

  bool ok() const { return !failed_; }
  TRITONSERVER_Error_Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<prefix><message>".
  Status WithPrefix(const std::string& prefix) const
  {
    if (ok()) return *this;
    return Status(code_, prefix + message_);
  }

 private:
  Status(TRITONSERVER_Error_Code code, std::string message)
      : failed_(true), code_(code), message_(std::move(message))
  {
  }

  bool failed_ = false;
  TRITONSERVER_Error_Code code_ = TRITONSERVER_ERROR_UNKNOWN;
  std::string message_;
};

// A frame from the stub that breaks docs/protocol.md: the reader kills the
// stub that sent it.
inline Status
Violation(const std::string& what)
{
  return Status::InvalidArg("tritonpy protocol violation: " + what);
}

}  // namespace tritonpy

#define TRITONPY_CONCAT_INNER(a, b) a##b
#define TRITONPY_CONCAT(a, b) TRITONPY_CONCAT_INNER(a, b)

// Evaluates `expr` (a Status) and returns it from the enclosing function if
// it failed.
#define TRITONPY_RETURN_IF_ERROR(expr)                         \
  do {                                                         \
    ::tritonpy::Status TRITONPY_CONCAT(s_, __LINE__) = (expr); \
    if (!TRITONPY_CONCAT(s_, __LINE__).ok()) {                 \
      return TRITONPY_CONCAT(s_, __LINE__);                    \
    }                                                          \
  } while (false)
