// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Custom metrics (docs/protocol.md, "Custom metrics").
//
// MetricStore (one per backend) owns the Triton objects: one
// TRITONSERVER_MetricFamily per kind and name, one TRITONSERVER_Metric per
// family and label set, each counted by the stub handles that use it.
// Triton shares Prometheus series by name and labels; counting them here
// means that one stub deleting its metric (or dying) never deletes a
// series another instance still updates, and that a family is deleted only
// after its metrics, whatever order the stub deletes them in.
//
// Between models (docs/hardening.md, "Custom metrics"):
// - a series belongs to the model that made it: another model asking for
//   the same family name and labels is refused while the owner holds it,
//   so no model can change another model's counters;
// - a family is shared (Triton has one registry) only by models that give
//   it the same kind and description;
// - each model may hold at most `max_families` family handles and
//   `max_series` series handles, a histogram's handle counting one series
//   per bucket plus two (_sum and _count), as Prometheus counts them. Every
//   handle counts, also a second one of a family or series the model
//   already holds (each is an entry in InstanceMetrics' maps); a family the
//   model holds only through its series counts once.
//
// InstanceMetrics (one per instance) maps one stub's handles to store
// entries and runs the ops of its METRIC frames.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ipc/channel.h"
#include "protocol/protocol.h"
#include "triton_c_api/triton_metric_api.h"
#include "util/error.h"
#include "util/mutex.h"

namespace tritonpy {

class MetricStore {
 public:
  // What a holder may read, without the lock: fixed once made. Who holds
  // an entry is the store's (Entry, under its lock).
  struct Family {
    TRITONSERVER_MetricFamily* family = nullptr;
    uint32_t kind = 0;
    std::string name;
    std::string description;
    std::string key;
  };
  struct Series {
    TRITONSERVER_Metric* metric = nullptr;
    Family* family = nullptr;
    std::string key;
    std::string owner;   // the model that made it
    uint64_t count = 1;  // Prometheus series: buckets + 2 for a histogram
  };
  using Labels = std::vector<std::pair<std::string, std::string>>;

  MetricStore() = default;
  MetricStore(const MetricStore&) = delete;
  MetricStore& operator=(const MetricStore&) = delete;
  // Deletes what is left (there is nothing once every instance is gone).
  ~MetricStore();

  // Per model (metric-max-families, metric-max-series). Before any use.
  void SetLimits(uint64_t max_families, uint64_t max_series) EXCLUDES(mu_);

  // Thread-safe. An acquired entry stays valid until released; `model`
  // names the model the acquiring stub serves, or is empty for the
  // backend's own metrics (MemoryReporter), which no model may use and
  // which count against no model's limits.
  Status AcquireFamily(
      const std::string& model, uint32_t kind, const std::string& name,
      const std::string& description, Family** out) EXCLUDES(mu_);
  void ReleaseFamily(const std::string& model, Family* family) EXCLUDES(mu_);
  // `buckets` are used by histograms only. `family` must be held by
  // `model`.
  Status AcquireSeries(
      const std::string& model, Family* family, const Labels& labels,
      const std::vector<double>& buckets, Series** out) EXCLUDES(mu_);
  void ReleaseSeries(Series* series) EXCLUDES(mu_);

  // Live Triton objects (for tests and logs).
  size_t family_count() EXCLUDES(mu_);
  size_t series_count() EXCLUDES(mu_);

 private:
  // What one model holds, as counted against the caps.
  struct Usage {
    uint64_t families = 0;
    uint64_t series = 0;
  };
  // One model's holds on a family: its handles, and its series in it.
  struct FamilyUser {
    uint64_t handles = 0;
    uint64_t series = 0;
    // What it counts against metric-max-families: each handle, or one
    // for a family held through its series alone.
    uint64_t weight() const { return handles != 0 ? handles : series != 0; }
  };
  // A family and who holds it.
  struct FamilyEntry {
    std::unique_ptr<Family> family;
    uint64_t refs = 0;                        // handles and series
    std::map<std::string, FamilyUser> users;  // model -> its part of refs
  };
  // A series and its handles.
  struct SeriesEntry {
    std::unique_ptr<Series> series;
    uint64_t refs = 0;
  };
  // `handle`: a family handle, else a series made in the family.
  void HoldFamilyLocked(
      const std::string& model, FamilyEntry* entry, bool handle) REQUIRES(mu_);
  void ReleaseFamilyLocked(
      const std::string& model, const Family* family, bool handle)
      REQUIRES(mu_);

  Mutex mu_;
  uint64_t max_families_ GUARDED_BY(mu_) = 1000;
  uint64_t max_series_ GUARDED_BY(mu_) = 10000;
  std::map<std::string, FamilyEntry> families_ GUARDED_BY(mu_);  // by key
  std::map<std::string, SeriesEntry> series_ GUARDED_BY(mu_);    // by key
  std::map<std::string, Usage> usage_ GUARDED_BY(mu_);
};

class InstanceMetrics {
 public:
  // `describe` names the model and instance in logged errors; `model` is
  // the model's name, which owns its series in the store (empty: describe).
  InstanceMetrics(
      MetricStore* store, std::string describe, std::string model = {})
      : store_(store),
        describe_(std::move(describe)),
        model_(model.empty() ? describe_ : std::move(model))
  {
  }
  InstanceMetrics(const InstanceMetrics&) = delete;
  InstanceMetrics& operator=(const InstanceMetrics&) = delete;
  ~InstanceMetrics() { Clear(); }

  // Runs the ops of one METRIC frame in order. A frame with a call id is
  // answered with METRIC_DONE (the outcome of its last op) on `channel`;
  // other failures are logged. Fails only for a malformed body.
  // Called by the one thread that reads the stub's socket.
  Status OnFrame(
      const proto::FrameView& f, const uint8_t* body, Channel* channel);
  // Drops every handle of the stub (it died or its instance is unloading).
  void Clear();

 private:
  Status Run(const proto::MetricOp& op, double* value);
  Status SeriesOf(uint32_t handle, MetricStore::Series** out);

  MetricStore* store_;
  std::string describe_;
  std::string model_;
  std::unordered_map<uint32_t, MetricStore::Family*> families_;
  std::unordered_map<uint32_t, MetricStore::Series*> series_;
};

}  // namespace tritonpy
