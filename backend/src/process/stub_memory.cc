// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "process/stub_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace tritonpy {

namespace {

// Reads a /proc file whole. /proc files have no size, so read until EOF.
Status
ReadWhole(const std::string& path, std::string* out)
{
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::Unavailable(
        "cannot open " + path + ": " + std::strerror(errno));
  }
  out->clear();
  char buf[16384];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int err = errno;
    close(fd);
    if (n < 0) {
      return Status::Unavailable(
          "cannot read " + path + ": " + std::strerror(err));
    }
    return Status();
  }
}

}  // namespace

bool
ParseSmaps(const std::string& text, ProcessMemory* out)
{
  *out = ProcessMemory();
  bool seen_pss = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const size_t colon = text.find(':', pos);
    if (colon < end) {
      const std::string key = text.substr(pos, colon - pos);
      uint64_t* field = nullptr;
      if (key == "Pss") {
        field = &out->pss_bytes;
        seen_pss = true;
      } else if (key == "Private_Clean" || key == "Private_Dirty") {
        field = &out->private_bytes;
      } else if (key == "Rss") {
        field = &out->rss_bytes;
      }
      // Mapping header lines ("7f..-7f.. r-xp ...") hold no ':' before
      // the path's, and name no key above.
      if (field != nullptr) {
        *field += std::strtoull(text.c_str() + colon + 1, nullptr, 10) << 10;
      }
    }
    pos = end + 1;
  }
  return seen_pss;
}

Status
ReadProcessMemory(pid_t pid, ProcessMemory* out, const std::string& proc_root)
{
  const std::string dir = proc_root + "/" + std::to_string(pid);
  std::string text;
  Status s = ReadWhole(dir + "/smaps_rollup", &text);
  std::string path = dir + "/smaps_rollup";
  if (!s.ok()) {
    // Kernels before 4.14 have no rollup: sum the mappings.
    Status whole = ReadWhole(dir + "/smaps", &text);
    if (!whole.ok()) return s;  // the rollup's failure says more
    path = dir + "/smaps";
  }
  if (!ParseSmaps(text, out)) {
    return Status::Unavailable(path + " has no Pss line (the process exited)");
  }
  return Status();
}

}  // namespace tritonpy
