// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "util/barrier.h"

#include <cstdlib>
#include <exception>
#include <new>
#include <system_error>

namespace tritonpy {

std::string
DescribeCurrentException() noexcept
{
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return "out of memory (std::bad_alloc)";
  } catch (const std::system_error& e) {
    try {
      return std::string(e.what()) + " (std::system_error)";
    } catch (...) {
      return std::string();
    }
  } catch (const std::exception& e) {
    try {
      return std::string(e.what()) + " (std::exception)";
    } catch (...) {
      return std::string();
    }
  } catch (...) {
    return "an exception of unknown type";
  }
}

namespace {

// TRITONPY_TEST_FAULT, read once; null when unset or empty.
const char*
FaultSpec()
{
  static const char* const spec = [] {
    const char* v = getenv("TRITONPY_TEST_FAULT");
    return v != nullptr && v[0] != '\0' ? v : nullptr;
  }();
  return spec;
}

}  // namespace

void
InjectFault(const std::string& model, const char* point)
{
  const char* spec = FaultSpec();
  if (spec == nullptr) return;
  const std::string want = model + ":" + point;
  const std::string list = std::string(",") + spec + ",";
  if (list.find("," + want + ",") != std::string::npos) throw std::bad_alloc();
}

}  // namespace tritonpy
