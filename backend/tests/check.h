// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// CHECK for the backend's C++ test programs: a failed condition is printed
// and counted, and the test goes on; main() ends with
// "ok: 0 failure(s)" (what tests/unit/test_backend_unit.py looks for).
#pragma once

#include <cstdio>

namespace tritonpy_test {
inline int failures = 0;
}  // namespace tritonpy_test

#define CHECK(cond)                                          \
  do {                                                       \
    if (!(cond)) {                                           \
      ++tritonpy_test::failures;                             \
      printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                        \
  } while (false)
