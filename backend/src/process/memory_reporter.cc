// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "process/memory_reporter.h"

#include <chrono>

#include "triton/triton_util.h"

namespace tritonpy {

namespace {

// The store's owner of the backend's own series: no model has an empty
// name, so none can use them, and the per-model limits do not apply.
const char* const kOwner = "";

double
Bytes(uint64_t n)
{
  return static_cast<double>(n);
}

}  // namespace

MemoryReporter::MemoryReporter(
    MetricStore* store, double interval_seconds, bool debug)
    : store_(store),
      interval_ms_(static_cast<int64_t>(interval_seconds * 1000)),
      debug_(debug),
      next_round_(
          std::chrono::steady_clock::now() +
          std::chrono::milliseconds(interval_ms_))
{
  if (interval_ms_ <= 0) return;
  Status s = store_->AcquireFamily(
      kOwner, TRITONSERVER_METRIC_KIND_GAUGE, kPssFamily,
      "Proportional set size of a tritonpy stub process in bytes: its "
      "private pages plus its share of the pages it shares with other "
      "processes (/proc/<pid>/smaps_rollup, read every "
      "stub-memory-interval-seconds)",
      &pss_family_);
  if (s.ok()) {
    s = store_->AcquireFamily(
        kOwner, TRITONSERVER_METRIC_KIND_GAUGE, kPrivateFamily,
        "Private memory of a tritonpy stub process in bytes "
        "(Private_Clean + Private_Dirty): pages no other process maps, "
        "given back when it ends",
        &private_family_);
  }
  if (!s.ok()) {
    TRITONPY_LOG_WARN(
        "tritonpy: stub memory metrics are not available (" + s.message() +
        "); TRITONPY_DEBUG lines still report it");
  }
  thread_.Start(
      "tritonpy-memory", "the stub memory reporter", [this] { return Round(); },
      LogAndGoOn);
}

MemoryReporter::~MemoryReporter()
{
  thread_.Stop();
  thread_.Join();
  std::map<uint64_t, Entry> left;
  {
    MutexLock lock(&mu_);
    left.swap(entries_);
  }
  for (auto& entry : left) ReleaseSeries(&entry.second);
  if (pss_family_ != nullptr) store_->ReleaseFamily(kOwner, pss_family_);
  if (private_family_ != nullptr) {
    store_->ReleaseFamily(kOwner, private_family_);
  }
}

void
MemoryReporter::AcquireSeries(const Labels& labels, Entry* entry)
{
  if (pss_family_ == nullptr || private_family_ == nullptr) return;
  Status s =
      store_->AcquireSeries(kOwner, pss_family_, labels, {}, &entry->pss);
  if (s.ok()) {
    s = store_->AcquireSeries(
        kOwner, private_family_, labels, {}, &entry->private_);
  }
  if (!s.ok()) {
    ReleaseSeries(entry);
    TRITONPY_LOG_WARN(
        "tritonpy: no memory metrics for " + entry->describe + ": " +
        s.message());
  }
}

void
MemoryReporter::ReleaseSeries(Entry* entry)
{
  if (entry->pss != nullptr) store_->ReleaseSeries(entry->pss);
  if (entry->private_ != nullptr) store_->ReleaseSeries(entry->private_);
  entry->pss = nullptr;
  entry->private_ = nullptr;
}

uint64_t
MemoryReporter::Add(
    pid_t pid, const Labels& labels, const std::string& describe)
{
  if (interval_ms_ <= 0) return 0;
  Entry entry;
  entry.pid = pid;
  entry.describe = describe;
  AcquireSeries(labels, &entry);  // the store's lock, not ours
  uint64_t id;
  {
    MutexLock lock(&mu_);
    id = next_id_++;
    entries_.emplace(id, std::move(entry));
  }
  thread_.Wake();  // read it now, not an interval from now
  return id;
}

void
MemoryReporter::Remove(uint64_t id)
{
  if (id == 0) return;
  Entry entry;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    entry = std::move(it->second);
    entries_.erase(it);
  }
  ReleaseSeries(&entry);
}

bool
MemoryReporter::Last(uint64_t id, ProcessMemory* out)
{
  MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.read) return false;
  *out = it->second.last;
  return true;
}

bool
MemoryReporter::Round()
{
  if (!thread_.WaitUntil(next_round_)) return false;
  const auto woke = std::chrono::steady_clock::now();
  // Woken before the round is due: a registration, read alone.
  const bool everyone = woke >= next_round_;
  if (everyone) next_round_ = woke + std::chrono::milliseconds(interval_ms_);
  std::vector<std::pair<uint64_t, pid_t>> todo;
  {
    MutexLock lock(&mu_);
    for (const auto& [id, entry] : entries_) {
      if (everyone || !entry.read) todo.emplace_back(id, entry.pid);
    }
  }
  for (const auto& [id, pid] : todo) {
    // Read without the lock: Add and Remove never wait for /proc.
    ProcessMemory now;
    const Status read = ReadProcessMemory(pid, &now);
    std::string line;
    {
      MutexLock lock(&mu_);
      auto it = entries_.find(id);
      if (it == entries_.end()) continue;  // removed meanwhile
      Entry& e = it->second;
      if (!read.ok()) {
        // A stub between its death and its reap, or a /proc we may not
        // read (hidepid): keep the last value, say so once.
        if (!e.warned) {
          e.warned = true;
          TRITONPY_LOG_VERBOSE(
              "tritonpy: memory of " + e.describe + " (pid " +
              std::to_string(pid) + "): " + read.message());
        }
        continue;
      }
      const bool changed = !e.read || now.pss_bytes != e.last.pss_bytes ||
                           now.private_bytes != e.last.private_bytes;
      e.read = true;
      e.last = now;
      if (e.pss != nullptr) {
        LogIfError(
            TRITONSERVER_MetricSet(e.pss->metric, Bytes(now.pss_bytes)),
            "setting a stub memory metric");
        LogIfError(
            TRITONSERVER_MetricSet(
                e.private_->metric, Bytes(now.private_bytes)),
            "setting a stub memory metric");
      }
      if (debug_ && changed) {
        line = "tritonpy-debug memory " + e.describe +
               " pid=" + std::to_string(pid) +
               ": pss_bytes=" + std::to_string(now.pss_bytes) +
               " private_bytes=" + std::to_string(now.private_bytes) +
               " rss_bytes=" + std::to_string(now.rss_bytes);
      }
    }
    if (!line.empty()) TRITONPY_LOG_INFO(line);
  }
  return true;
}

}  // namespace tritonpy
