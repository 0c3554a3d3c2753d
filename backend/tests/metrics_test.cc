// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Tests of the custom metrics' caps (metrics.cc) against the stand-in for
// tritonserver (fake_triton.cc), built with ASan and UBSan: every handle
// a stub makes counts against metric-max-families and metric-max-series,
// also a second handle of a family or series the model already holds, and
// released handles count no more. And the stub memory reporter
// (memory_reporter.cc), which sets its gauges through the same store.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "fake_triton.h"
#include "process/memory_reporter.h"
#include "triton/metrics.h"

using tritonpy::MemoryReporter;
using tritonpy::MetricStore;
using tritonpy::ProcessMemory;
using tritonpy::Status;

namespace {

bool
Says(const Status& s, const std::string& text)
{
  if (s.message().find(text) != std::string::npos) return true;
  printf("  status was: '%s'\n", s.message().c_str());
  return false;
}

// Handles of one family, made again and again by one model: each counts.
void
TestFamilyHandlesCount()
{
  MetricStore store;
  store.SetLimits(/*max_families=*/3, /*max_series=*/100);
  std::vector<MetricStore::Family*> held;
  for (int i = 0; i < 3; ++i) {
    MetricStore::Family* f = nullptr;
    CHECK(store.AcquireFamily("m", 0, "requests", "d", &f).ok());
    held.push_back(f);
  }
  MetricStore::Family* f = nullptr;
  Status s = store.AcquireFamily("m", 0, "requests", "d", &f);
  CHECK(!s.ok() && Says(s, "metric-max-families"));
  // Another family is refused as well: the handles filled the cap.
  s = store.AcquireFamily("m", 0, "other", "d", &f);
  CHECK(!s.ok() && Says(s, "model 'm' holds 3 metric families"));
  // Another model is not limited by this one's handles.
  CHECK(store.AcquireFamily("n", 0, "requests", "d", &f).ok());
  store.ReleaseFamily("n", f);
  // A handle released makes room for one.
  store.ReleaseFamily("m", held.back());
  held.pop_back();
  CHECK(store.AcquireFamily("m", 0, "requests", "d", &f).ok());
  held.push_back(f);
  CHECK(store.family_count() == 1);
  for (MetricStore::Family* h : held) store.ReleaseFamily("m", h);
  CHECK(store.family_count() == 0);
}

// Handles of one series: each counts, a histogram's as its buckets plus two.
void
TestSeriesHandlesCount()
{
  MetricStore store;
  store.SetLimits(/*max_families=*/10, /*max_series=*/10);
  MetricStore::Family* counter = nullptr;
  MetricStore::Family* histogram = nullptr;
  CHECK(store.AcquireFamily("m", 0, "c", "d", &counter).ok());
  CHECK(store.AcquireFamily("m", 2, "h", "d", &histogram).ok());
  const MetricStore::Labels labels = {{"k", "v"}};
  std::vector<MetricStore::Series*> held;
  for (int i = 0; i < 5; ++i) {
    MetricStore::Series* s = nullptr;
    CHECK(store.AcquireSeries("m", counter, labels, {}, &s).ok());
    held.push_back(s);
  }
  CHECK(store.series_count() == 1);
  // 5 handles held; a histogram of 2 buckets counts 4: 9 of 10.
  MetricStore::Series* h = nullptr;
  CHECK(store.AcquireSeries("m", histogram, labels, {1.0, 2.0}, &h).ok());
  // A second handle of that histogram would add 4 more.
  MetricStore::Series* again = nullptr;
  Status s = store.AcquireSeries("m", histogram, labels, {1.0, 2.0}, &again);
  CHECK(
      !s.ok() && Says(s, "holds 9 metric series and this metric would add 4"));
  MetricStore::Series* one_more = nullptr;
  CHECK(store.AcquireSeries("m", counter, labels, {}, &one_more).ok());
  s = store.AcquireSeries("m", counter, labels, {}, &again);
  CHECK(!s.ok() && Says(s, "metric-max-series"));
  // Released handles count no more, while the series lives on.
  store.ReleaseSeries(one_more);
  store.ReleaseSeries(held.back());
  held.pop_back();
  CHECK(store.series_count() == 2);
  CHECK(store.AcquireSeries("m", counter, labels, {}, &again).ok());
  held.push_back(again);
  for (MetricStore::Series* x : held) store.ReleaseSeries(x);
  store.ReleaseSeries(h);
  CHECK(store.series_count() == 0);
  // The family handles were deleted after their series: all is gone.
  store.ReleaseFamily("m", counter);
  store.ReleaseFamily("m", histogram);
  CHECK(store.family_count() == 0);
  // And nothing is left counted: the caps are whole again.
  std::vector<MetricStore::Family*> families;
  for (int i = 0; i < 10; ++i) {
    MetricStore::Family* f = nullptr;
    CHECK(store.AcquireFamily("m", 0, "c", "d", &f).ok());
    families.push_back(f);
  }
  for (MetricStore::Family* f : families) store.ReleaseFamily("m", f);
}

// A family whose handle was deleted while its series live counts once,
// and a handle made for it again adds nothing more.
void
TestFamilyHeldThroughSeries()
{
  MetricStore store;
  store.SetLimits(/*max_families=*/1, /*max_series=*/10);
  MetricStore::Family* f = nullptr;
  CHECK(store.AcquireFamily("m", 1, "g", "d", &f).ok());
  MetricStore::Series* s = nullptr;
  CHECK(store.AcquireSeries("m", f, {}, {}, &s).ok());
  store.ReleaseFamily("m", f);
  MetricStore::Family* other = nullptr;
  CHECK(!store.AcquireFamily("m", 1, "other", "d", &other).ok());
  CHECK(store.AcquireFamily("m", 1, "g", "d", &f).ok());
  CHECK(!store.AcquireFamily("m", 1, "g", "d", &other).ok());
  store.ReleaseSeries(s);
  store.ReleaseFamily("m", f);
  CHECK(store.family_count() == 0 && store.series_count() == 0);
}

// Waits for the reporter's first reading of `id`: whether it came.
bool
ReadOnce(MemoryReporter* reporter, uint64_t id)
{
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  ProcessMemory m;
  while (!reporter->Last(id, &m)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A registration is read at once, and it alone: the processes read
// before wait for the interval (here an hour, so never in this test).
void
TestMemoryReporterReadsANewProcessAlone()
{
  MetricStore store;
  MemoryReporter reporter(&store, /*interval_seconds=*/3600, false);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    const uint64_t before = fake_triton::MetricSets();
    const std::string n = std::to_string(i);
    ids.push_back(reporter.Add(getpid(), {{"instance", n}}, "process " + n));
    CHECK(ids.back() != 0);
    CHECK(ReadOnce(&reporter, ids.back()));
    // Its two gauges, PSS and private: none of the ones read before.
    CHECK(fake_triton::MetricSets() - before == 2);
  }
  for (uint64_t id : ids) reporter.Remove(id);
}

}  // namespace

int
main()
{
  TestFamilyHandlesCount();
  TestSeriesHandlesCount();
  TestFamilyHeldThroughSeries();
  TestMemoryReporterReadsANewProcessAlone();
  printf(
      "%s: %d failure(s)\n", tritonpy_test::failures == 0 ? "ok" : "FAIL",
      tritonpy_test::failures);
  return tritonpy_test::failures == 0 ? 0 : 1;
}
