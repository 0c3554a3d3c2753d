// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "triton/metrics.h"

#include <algorithm>

#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"

namespace tritonpy {

namespace {

const char* const kKindNames[] = {"counter", "gauge", "histogram"};

// Length-prefixed pieces, so that no name or label can forge another key.
void
AppendKeyPart(const std::string& part, std::string* key)
{
  key->append(std::to_string(part.size()));
  key->push_back(':');
  key->append(part);
}

}  // namespace

// ---------------------------------------------------------------- store

MetricStore::~MetricStore()
{
  for (auto& entry : series_) {
    (void)FromTriton(TRITONSERVER_MetricDelete(entry.second.series->metric));
  }
  for (auto& entry : families_) {
    (void)FromTriton(
        TRITONSERVER_MetricFamilyDelete(entry.second.family->family));
  }
}

void
MetricStore::SetLimits(uint64_t max_families, uint64_t max_series)
{
  MutexLock lock(&mu_);
  max_families_ = max_families;
  max_series_ = max_series;
}

Status
MetricStore::AcquireFamily(
    const std::string& model, uint32_t kind, const std::string& name,
    const std::string& description, Family** out)
{
  std::string key = std::to_string(kind) + "/";
  AppendKeyPart(name, &key);
  MutexLock lock(&mu_);
  auto it = families_.find(key);
  const FamilyUser* user = nullptr;
  if (it != families_.end()) {
    auto found = it->second.users.find(model);
    if (found != it->second.users.end()) user = &found->second;
  }
  if (it != families_.end() && user == nullptr &&
      it->second.family->description != description) {
    // Models share a family only when they agree on what it is.
    std::string other = it->second.users.begin()->first;
    return Status::InvalidArg(
        "metric family '" + name + "' is registered by model '" + other +
        "' with the description '" + it->second.family->description +
        "'; another model may use it only with the same kind and "
        "description (tritonpy)");
  }
  // Every handle counts, a second one of a family already held too; a
  // family held through its series alone counts once already. The
  // backend's own families (model "") count against no model's limit.
  const bool adds = user == nullptr || user->handles != 0;
  if (adds && !model.empty() && usage_[model].families >= max_families_) {
    return Status::Unavailable(
        "model '" + model + "' holds " + std::to_string(max_families_) +
        " metric families, the most a model may hold (backend setting "
        "metric-max-families)");
  }
  if (it == families_.end()) {
    auto family = std::make_unique<Family>();
    TRITONPY_RETURN_IF_TRITON_ERROR(TRITONSERVER_MetricFamilyNew(
        &family->family, static_cast<TRITONSERVER_MetricKind>(kind),
        name.c_str(), description.c_str()));
    family->kind = kind;
    family->name = name;
    family->description = description;
    family->key = key;
    it = families_.emplace(key, FamilyEntry()).first;
    it->second.family = std::move(family);
  }
  HoldFamilyLocked(model, &it->second, /*handle=*/true);
  *out = it->second.family.get();
  return Status();
}

void
MetricStore::HoldFamilyLocked(
    const std::string& model, FamilyEntry* entry, bool handle)
{
  ++entry->refs;
  FamilyUser& user = entry->users[model];
  const uint64_t before = user.weight();
  ++(handle ? user.handles : user.series);
  usage_[model].families += user.weight() - before;
}

void
MetricStore::ReleaseFamily(const std::string& model, Family* family)
{
  MutexLock lock(&mu_);
  ReleaseFamilyLocked(model, family, /*handle=*/true);
}

void
MetricStore::ReleaseFamilyLocked(
    const std::string& model, const Family* family, bool handle)
{
  auto it = families_.find(family->key);
  if (it == families_.end()) return;
  FamilyEntry& entry = it->second;
  auto user = entry.users.find(model);
  if (user != entry.users.end()) {
    FamilyUser& u = user->second;
    const uint64_t before = u.weight();
    uint64_t& held = handle ? u.handles : u.series;
    if (held != 0) --held;
    Usage& usage = usage_[model];
    usage.families -= before - u.weight();
    if (u.handles == 0 && u.series == 0) entry.users.erase(user);
    if (usage.families == 0 && usage.series == 0) usage_.erase(model);
  }
  if (--entry.refs > 0) return;
  Status s = FromTriton(TRITONSERVER_MetricFamilyDelete(family->family));
  if (!s.ok()) {
    TRITONPY_LOG_ERROR(
        "tritonpy: deleting metric family '" + family->name +
        "': " + s.message());
  }
  families_.erase(it);  // frees `family`
}

Status
MetricStore::AcquireSeries(
    const std::string& model, Family* family, const Labels& labels,
    const std::vector<double>& buckets, Series** out)
{
  Labels sorted = labels;
  std::sort(sorted.begin(), sorted.end());
  std::string key = family->key + "{";
  for (const auto& label : sorted) {
    AppendKeyPart(label.first, &key);
    AppendKeyPart(label.second, &key);
  }
  MutexLock lock(&mu_);
  auto it = series_.find(key);
  if (it != series_.end() && it->second.series->owner != model) {
    return Status::InvalidArg(
        "this series of metric family '" + family->name + "' belongs to " +
        (it->second.series->owner.empty()
             ? std::string("tritonpy itself")
             : "model '" + it->second.series->owner + "'") +
        ": a model cannot use another model's series (tritonpy)");
  }
  // Every handle counts, a second one of a series already held too.
  const bool histogram = family->kind == TRITONSERVER_METRIC_KIND_HISTOGRAM;
  const uint64_t count = it != series_.end() ? it->second.series->count
                         : histogram         ? buckets.size() + 2
                                             : 1;
  const uint64_t held = model.empty() ? 0 : usage_[model].series;
  if (!model.empty() && (count > max_series_ || held > max_series_ - count)) {
    return Status::Unavailable(
        "model '" + model + "' holds " + std::to_string(held) +
        " metric series and this metric would add " + std::to_string(count) +
        ", past the most a model may hold, " + std::to_string(max_series_) +
        " (backend setting metric-max-series; a histogram counts its "
        "buckets plus two, and each Metric object counts)");
  }
  if (it == series_.end()) {
    std::vector<TRITONSERVER_Parameter*> params;
    for (const auto& label : sorted) {
      params.push_back(TRITONSERVER_ParameterNew(
          label.first.c_str(), TRITONSERVER_PARAMETER_STRING,
          label.second.c_str()));
    }
    TRITONSERVER_MetricArgs* args = nullptr;
    Status s;
    if (histogram) {
      s = FromTriton(TRITONSERVER_MetricArgsNew(&args));
      if (s.ok()) {
        s = FromTriton(TRITONSERVER_MetricArgsSetHistogram(
            args, buckets.data(), buckets.size()));
      }
    }
    auto series = std::make_unique<Series>();
    if (s.ok()) {
      s = FromTriton(TRITONSERVER_MetricNewWithArgs(
          &series->metric, family->family,
          const_cast<const TRITONSERVER_Parameter**>(params.data()),
          params.size(), args));
    }
    if (args != nullptr) (void)FromTriton(TRITONSERVER_MetricArgsDelete(args));
    for (TRITONSERVER_Parameter* p : params) TRITONSERVER_ParameterDelete(p);
    TRITONPY_RETURN_IF_ERROR(s);
    series->family = family;
    series->key = key;
    series->owner = model;
    series->count = count;
    // The family outlives its series.
    HoldFamilyLocked(model, &families_.at(family->key), /*handle=*/false);
    it = series_.emplace(key, SeriesEntry()).first;
    it->second.series = std::move(series);
  }
  usage_[model].series += count;
  ++it->second.refs;
  *out = it->second.series.get();
  return Status();
}

void
MetricStore::ReleaseSeries(Series* series)
{
  MutexLock lock(&mu_);
  auto it = series_.find(series->key);
  if (it == series_.end()) return;
  const std::string owner = series->owner;
  usage_[owner].series -= series->count;  // each handle counted it
  if (--it->second.refs > 0) return;
  Status s = FromTriton(TRITONSERVER_MetricDelete(series->metric));
  if (!s.ok()) {
    TRITONPY_LOG_ERROR(
        "tritonpy: deleting a metric of family '" + series->family->name +
        "': " + s.message());
  }
  const Family* family = series->family;
  series_.erase(it);  // frees `series`
  ReleaseFamilyLocked(owner, family, /*handle=*/false);
}

size_t
MetricStore::family_count()
{
  MutexLock lock(&mu_);
  return families_.size();
}

size_t
MetricStore::series_count()
{
  MutexLock lock(&mu_);
  return series_.size();
}

// ---------------------------------------------------------------- instance

Status
InstanceMetrics::OnFrame(
    const proto::FrameView& f, const uint8_t* body, Channel* channel)
{
  proto::MetricBody m;
  TRITONPY_RETURN_IF_ERROR(proto::DecodeMetric(body, f.body_len, &m));
  proto::MetricDoneBody done;
  done.ok = 1;
  for (size_t i = 0; i < m.ops.size(); ++i) {
    double value = 0;
    Status s = Run(m.ops[i], &value);
    bool answered = f.id != 0 && i + 1 == m.ops.size();
    if (answered) {
      done.ok = s.ok() ? 1 : 0;
      done.error = s.message();
      done.value = value;
    } else if (!s.ok()) {
      TRITONPY_LOG_ERROR(
          "tritonpy: " + describe_ + ": custom metric: " + s.message());
    }
  }
  if (f.id != 0 && channel != nullptr) {
    // A stub that is gone needs no answer.
    (void)channel->Send(proto::MetricDoneFrame(f.id, done));
  }
  return Status();
}

Status
InstanceMetrics::SeriesOf(uint32_t handle, MetricStore::Series** out)
{
  auto it = series_.find(handle);
  if (it == series_.end()) {
    return Status::NotFound("no metric with handle " + std::to_string(handle));
  }
  *out = it->second;
  return Status();
}

Status
InstanceMetrics::Run(const proto::MetricOp& op, double* value)
{
  using Op = proto::MetricOpCode;
  MetricStore::Series* series = nullptr;
  switch (op.op) {
    case Op::kFamilyNew: {
      if (op.family == 0 || families_.count(op.family) != 0) {
        return Status::InvalidArg(
            "metric family handle " + std::to_string(op.family) +
            " is zero or in use");
      }
      MetricStore::Family* family = nullptr;
      TRITONPY_RETURN_IF_ERROR(store_->AcquireFamily(
          model_, op.kind, op.name, op.description, &family));
      families_[op.family] = family;
      return Status();
    }
    case Op::kFamilyDelete: {
      auto it = families_.find(op.family);
      if (it == families_.end()) {
        return Status::NotFound(
            "no metric family with handle " + std::to_string(op.family));
      }
      store_->ReleaseFamily(model_, it->second);
      families_.erase(it);
      return Status();
    }
    case Op::kMetricNew: {
      auto fam = families_.find(op.family);
      if (fam == families_.end()) {
        return Status::NotFound(
            "no metric family with handle " + std::to_string(op.family));
      }
      if (op.metric == 0 || series_.count(op.metric) != 0) {
        return Status::InvalidArg(
            "metric handle " + std::to_string(op.metric) +
            " is zero or in use");
      }
      TRITONPY_RETURN_IF_ERROR(store_->AcquireSeries(
          model_, fam->second, op.labels, op.values, &series));
      series_[op.metric] = series;
      return Status();
    }
    case Op::kMetricDelete: {
      TRITONPY_RETURN_IF_ERROR(SeriesOf(op.metric, &series));
      store_->ReleaseSeries(series);
      series_.erase(op.metric);
      return Status();
    }
    case Op::kIncrement:
      TRITONPY_RETURN_IF_ERROR(SeriesOf(op.metric, &series));
      return FromTriton(TRITONSERVER_MetricIncrement(series->metric, op.value));
    case Op::kSet:
      TRITONPY_RETURN_IF_ERROR(SeriesOf(op.metric, &series));
      return FromTriton(TRITONSERVER_MetricSet(series->metric, op.value));
    case Op::kObserve:
      TRITONPY_RETURN_IF_ERROR(SeriesOf(op.metric, &series));
      for (double v : op.values) {
        TRITONPY_RETURN_IF_TRITON_ERROR(
            TRITONSERVER_MetricObserve(series->metric, v));
      }
      return Status();
    case Op::kValue:
      TRITONPY_RETURN_IF_ERROR(SeriesOf(op.metric, &series));
      return FromTriton(TRITONSERVER_MetricValue(series->metric, value))
          .WithPrefix(
              std::string(kKindNames[series->family->kind]) + " '" +
              series->family->name + "': ");
  }
  return Status::InvalidArg("unknown metric op");
}

void
InstanceMetrics::Clear()
{
  // Series first: each holds its family in the store anyway.
  for (auto& entry : series_) store_->ReleaseSeries(entry.second);
  series_.clear();
  for (auto& entry : families_) store_->ReleaseFamily(model_, entry.second);
  families_.clear();
}

}  // namespace tritonpy
