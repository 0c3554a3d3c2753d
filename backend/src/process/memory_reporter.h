// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// MemoryReporter: reports the PSS and private memory (stub_memory.h) of
// the processes registered with it, one backend-wide thread for all:
// - as the gauges tritonpy_stub_memory_pss_bytes and
//   tritonpy_stub_memory_private_bytes of Triton's metrics, one series
//   per process and its labels (a stub: kind="stub", model, version,
//   instance);
// - with TRITONPY_DEBUG=1, as a line in Triton's log whenever a reading
//   changed: "tritonpy-debug memory <describe> pid=N: pss_bytes=..
//   private_bytes=.. rss_bytes=..".
//
// When: a process is read as soon as it is registered (a stub once its
// initialize() returned, so what initialize loaded shows at once), then
// every stub-memory-interval-seconds. A registration wakes a reading of the
// processes never read yet, not of all: 64 instances starting at once cost
// 64 readings, not 64 times the processes already running. Never per request
// and never on an instance's threads: a backend cannot hear when Triton's
// metrics are scraped, and reading smaps walks the page tables of the process
// (1 to 3 ms of kernel CPU for a stub that imported torch, measured on the
// bench machine), so a low-rate timer on a thread of its own is the cheap
// place: at the default 30 s, 128 such stubs cost about 1% of a core.
//
// Who registers: every instance's StubSupervisor, for its stub, from the
// moment it is adopted until just before it is reaped (so no pid is read
// after it could be reused). Anything else that runs processes on the
// backend's behalf (a stub template) registers them through Add with
// labels of its own, e.g. {{"kind", "template"}, ...}.
//
// Threads: Add and Remove from any thread; neither waits for a reading.
// The series are deleted with their registration: a stub that died
// leaves no stale value behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "process/stub_memory.h"
#include "triton/metrics.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"
#include "util/worker_thread.h"

namespace tritonpy {

class MemoryReporter {
 public:
  using Labels = MetricStore::Labels;
  static constexpr const char* kPssFamily = "tritonpy_stub_memory_pss_bytes";
  static constexpr const char* kPrivateFamily =
      "tritonpy_stub_memory_private_bytes";

  // `interval_seconds` 0: off (Add registers nothing, no thread runs).
  // `debug`: write the TRITONPY_DEBUG lines. The store outlives this.
  MemoryReporter(MetricStore* store, double interval_seconds, bool debug);
  ~MemoryReporter();  // stops and joins the thread; deletes every series
  MemoryReporter(const MemoryReporter&) = delete;
  MemoryReporter& operator=(const MemoryReporter&) = delete;

  // Reports `pid` under `labels` from now on; `describe` names it in log
  // lines ("model 'm' instance 'i'"). Returns the id Remove takes (0 when
  // off).
  uint64_t Add(pid_t pid, const Labels& labels, const std::string& describe);
  // Stops reporting and deletes the series. Unknown ids (0) are ignored.
  void Remove(uint64_t id);

  // The last reading of registration `id`; false before the first one.
  bool Last(uint64_t id, ProcessMemory* out);

  // Removes its registration when destroyed or replaced: what a process's
  // owner holds while the process may be read.
  class Registration {
   public:
    Registration() = default;
    Registration(MemoryReporter* reporter, uint64_t id)
        : reporter_(reporter), id_(id)
    {
    }
    ~Registration() { Reset(); }
    Registration(Registration&& other) noexcept { *this = std::move(other); }
    Registration& operator=(Registration&& other) noexcept
    {
      if (this != &other) {
        Reset();
        reporter_ = other.reporter_;
        id_ = other.id_;
        other.id_ = 0;
      }
      return *this;
    }
    void Reset()
    {
      if (reporter_ != nullptr && id_ != 0) reporter_->Remove(id_);
      id_ = 0;
    }

   private:
    MemoryReporter* reporter_ = nullptr;
    uint64_t id_ = 0;
  };

 private:
  struct Entry {
    pid_t pid = -1;
    std::string describe;
    MetricStore::Series* pss = nullptr;  // null: metrics unavailable
    MetricStore::Series* private_ = nullptr;
    bool read = false;
    ProcessMemory last;
    bool warned = false;  // a failed read was logged
  };

  // The thread's step: waits for the next round, then reads every
  // registered process; or, woken by a new registration before that, the
  // processes never read yet. False once stopped.
  bool Round() EXCLUDES(mu_);
  // Makes the two series of `labels` (logs once if Triton refuses).
  void AcquireSeries(const Labels& labels, Entry* entry);
  void ReleaseSeries(Entry* entry);

  MetricStore* const store_;
  const int64_t interval_ms_;
  const bool debug_;
  MetricStore::Family* pss_family_ = nullptr;
  MetricStore::Family* private_family_ = nullptr;

  Mutex mu_;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Entry> entries_ GUARDED_BY(mu_);
  // When the next reading of every process is due (the thread's alone).
  std::chrono::steady_clock::time_point next_round_;
  // Woken by a new registration, to read it now.
  WorkerThread thread_;
};

}  // namespace tritonpy
