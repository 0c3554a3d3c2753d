// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "model/machine_memory.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace tritonpy {

namespace {

// Limits at least this large mean "none" (cgroup v1 writes the largest
// page-aligned int64 for no limit).
constexpr uint64_t kNoLimit = UINT64_C(1) << 62;

// The number in `path` ("max" and unreadable files: 0, no limit).
uint64_t
ReadLimit(const std::string& path)
{
  std::ifstream f(path);
  std::string text;
  if (!f || !(f >> text)) return 0;
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0 || v == 0 || v >= kNoLimit) return 0;
  return v;
}

// The lowest limit in `file` of the cgroup `path` under `mount` and of its
// ancestors up to the mount (what applies to the cgroup). 0: none.
uint64_t
LowestOnPath(const std::string& mount, std::string path, const char* file)
{
  uint64_t lowest = 0;
  while (true) {
    while (!path.empty() && path.back() == '/') path.pop_back();
    const uint64_t v = ReadLimit(mount + path + "/" + file);
    if (v != 0 && (lowest == 0 || v < lowest)) lowest = v;
    if (path.empty()) return lowest;
    path.erase(path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
  }
}

}  // namespace

uint64_t
MachineMemory::usable() const
{
  if (physical == 0) return cgroup;
  if (cgroup == 0) return physical;
  return cgroup < physical ? cgroup : physical;
}

std::string
MachineMemory::Describe() const
{
  std::string out =
      physical == 0 ? "physical memory unknown"
                    : "physical memory " + std::to_string(physical) + " bytes";
  out += cgroup == 0 ? ", no cgroup limit"
                     : ", cgroup limit " + std::to_string(cgroup) + " bytes";
  return out;
}

MachineMemory
ReadMachineMemory(const std::string& root, uint64_t physical)
{
  MachineMemory m;
  if (physical != 0) {
    m.physical = physical;
  } else {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
      m.physical = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
    }
  }
  // Lines "<id>:<controllers>:<path>": "0::<path>" for cgroup v2, one with
  // "memory" among the controllers for v1. Both are tried: on a hybrid
  // system either may hold the limit.
  std::ifstream f(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    std::vector<uint64_t> found;
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        found.push_back(LowestOnPath(root + mount, path, "memory.max"));
      }
    } else {
      std::stringstream names(controllers);
      std::string name;
      while (std::getline(names, name, ',')) {
        if (name != "memory") continue;
        found.push_back(LowestOnPath(
            root + "/sys/fs/cgroup/memory", path, "memory.limit_in_bytes"));
      }
    }
    for (uint64_t v : found) {
      if (v != 0 && (m.cgroup == 0 || v < m.cgroup)) m.cgroup = v;
    }
  }
  return m;
}

}  // namespace tritonpy
