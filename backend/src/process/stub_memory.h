// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// What a process costs in memory, as the kernel accounts it
// (docs/performance.md, "What a forked stub shares"):
// - PSS, proportional set size: its private pages plus, for each page it
//   shares with other processes, its share (the page's size divided by
//   how many processes map it). The PSS of all processes adds up to the
//   memory they use together, which RSS does not: RSS counts a shared
//   page once in every process that maps it.
// - private bytes (Private_Clean + Private_Dirty): pages only this process
//   maps, what it would give back if it ended.
//
// Both come from /proc/<pid>/smaps_rollup (Linux 4.14 and later), or from
// the per-mapping /proc/<pid>/smaps, summed, on older kernels. Reading
// either walks the process's page tables (the kernel takes its mmap lock
// for reading): cheap, but not free, so it is never done per request.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "util/error.h"

namespace tritonpy {

struct ProcessMemory {
  uint64_t pss_bytes = 0;
  uint64_t private_bytes = 0;  // Private_Clean + Private_Dirty
  uint64_t rss_bytes = 0;
};

// Sums the "Pss:", "Private_Clean:", "Private_Dirty:" and "Rss:" lines
// (kB) of an smaps or smaps_rollup text; other fields (Pss_Anon, SwapPss
// ...) are not counted. False when the text has no "Pss:" line (a process
// that has exited shows an empty file).
bool ParseSmaps(const std::string& text, ProcessMemory* out);

// Reads process `pid` from `proc_root` ("/proc"; a test passes a directory
// laid out the same way). The error names the file and errno's text.
Status ReadProcessMemory(
    pid_t pid, ProcessMemory* out, const std::string& proc_root = "/proc");

}  // namespace tritonpy
