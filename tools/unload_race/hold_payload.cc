// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Preloaded into tritonserver by tools/unload_race.py. Triton's
// Payload::Execute wakes the thread waiting for a payload through
// std::__atomic_futex_unsigned_base::_M_futex_notify_all (libstdc++, called
// through the PLT, so a preloaded definition wins). When the caller is
// Payload::Execute, this one holds the backend thread for
// TRITONPY_HOLD_MS after the wake: the thread has finished the payload but
// has not yet put its instance back in its deque (BackendThread() does
// that after Execute returns). That is the window of the race described
// in docs/reliability.md, held open on purpose.
//
// TRITONPY_HOLD_RANGE: "<start>:<size>" in hex, where Payload::Execute lies
// in libtritonserver (from its symbol table; the script finds it).

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Range {
  unsigned long start = 0;
  unsigned long size = 0;
  long hold_us = 1000000;
};

Range
ReadRange()
{
  Range r;
  if (const char* text = getenv("TRITONPY_HOLD_RANGE")) {
    char* end = nullptr;
    r.start = strtoul(text, &end, 16);
    if (end != nullptr && *end == ':') r.size = strtoul(end + 1, nullptr, 16);
  }
  if (const char* ms = getenv("TRITONPY_HOLD_MS")) r.hold_us = atol(ms) * 1000;
  return r;
}

bool
CalledFromExecute(void* ret, const Range& range)
{
  Dl_info info;
  if (dladdr(ret, &info) == 0 || info.dli_fname == nullptr ||
      strstr(info.dli_fname, "libtritonserver") == nullptr) {
    return false;
  }
  const unsigned long offset = reinterpret_cast<unsigned long>(ret) -
                               reinterpret_cast<unsigned long>(info.dli_fbase);
  return offset >= range.start && offset < range.start + range.size;
}

}  // namespace

namespace std {
struct __atomic_futex_unsigned_base {
  static void _M_futex_notify_all(unsigned* word);
};
}  // namespace std

void
std::__atomic_futex_unsigned_base::_M_futex_notify_all(unsigned* word)
{
  using Notify = void (*)(unsigned*);
  static const Notify next = reinterpret_cast<Notify>(dlsym(
      RTLD_NEXT, "_ZNSt28__atomic_futex_unsigned_base19_M_futex_notify_allEPj"));
  static const Range range = ReadRange();
  next(word);
  if (CalledFromExecute(__builtin_return_address(0), range)) {
    fprintf(
        stderr, "unload_race: a payload is done; its backend thread waits "
                "before it takes its instance back\n");
    usleep(static_cast<useconds_t>(range.hold_us));
  }
}
