// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// How much memory tritonserver may use, for the defaults of the per-stub
// memory caps (stub-max-arena-bytes, stub-max-bls-bytes): the machine's
// physical memory, or the memory limit of the server's cgroup when that
// is lower (a container's limit is what the OOM killer enforces).
#pragma once

#include <cstdint>
#include <string>

namespace tritonpy {

struct MachineMemory {
  uint64_t physical = 0;  // 0: unknown
  uint64_t cgroup = 0;    // the lowest limit on the way to the root; 0: none

  // The lower of the two that are known; 0 when neither is.
  uint64_t usable() const;
  // "physical memory N bytes, cgroup limit M bytes" (or "no cgroup limit").
  std::string Describe() const;
};

// Reads /proc/self/cgroup and the cgroup file systems under `root` ("" in
// production; a test passes a directory laid out the same way), and the
// physical memory from sysconf unless `physical` is given.
MachineMemory ReadMachineMemory(
    const std::string& root = "", uint64_t physical = 0);

}  // namespace tritonpy
