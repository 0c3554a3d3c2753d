// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "bls/model_control.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "protocol/protocol.h"
#include "protocol/protocol_frames.h"
#include "triton/triton_util.h"
#include "util/barrier.h"
#include "util/worker_thread.h"

namespace tritonpy {

namespace {

int
Base64Value(char c)
{
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

Status
Base64Decode(const std::string& in, std::string* out)
{
  out->clear();
  out->reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r') continue;
    int v = Base64Value(c);
    if (v < 0) return Status::InvalidArg("file content is not base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return Status();
}

}  // namespace

std::string
SandboxedModels::LoadedBy(const std::string& name)
{
  MutexLock lock(&mu_);
  auto it = loaded_by_.find(name);
  return it == loaded_by_.end() ? std::string() : it->second;
}

void
SandboxedModels::Loaded(const std::string& name, const std::string& by)
{
  MutexLock lock(&mu_);
  loaded_by_[name] = by;
}

namespace {

// Whether the model repository holds a model `name` (loaded or not).
bool
InRepository(TRITONSERVER_Server* server, const std::string& name)
{
  TRITONSERVER_Message* index = nullptr;
  if (!FromTriton(TRITONSERVER_ServerModelIndex(server, 0, &index)).ok()) {
    return true;  // unknown: as if it were
  }
  std::string text;
  json::Value models;
  if (!TakeMessageJson(index, &text).ok() || !json::Parse(text, &models).ok() ||
      !models.is_array()) {
    return true;
  }
  for (const json::Value& m : models) {
    if (m.is_object() && json::GetString(m, "name") == name) return true;
  }
  return false;
}

std::string
LoadedBy(const SandboxedControl& policy, const std::string& name)
{
  return policy.models == nullptr ? std::string()
                                  : policy.models->LoadedBy(name);
}

}  // namespace

Status
CheckSandboxedLoad(
    TRITONSERVER_Server* server, const SandboxedControl& policy,
    const std::string& name, const std::string& config)
{
  const std::string who =
      "tritonpy: load_model('" + name +
      "') from a sandboxed model (stub-sandbox-model-control=true): ";
  const std::string by = LoadedBy(policy, name);
  const bool own = !by.empty() && by == policy.model;
  if (config.empty()) {
    if (own) return Status();
    return Status::InvalidArg(
        who +
        "give the model's config: a sandboxed model loads only models "
        "of its own, not the model repository's");
  }
  json::Value parsed;
  std::string backend;
  if (json::Parse(config, &parsed).ok() && parsed.is_object()) {
    backend = json::GetString(parsed, "backend");
  }
  if (backend != policy.backend) {
    return Status::InvalidArg(
        who + "its config must name backend '" + policy.backend +
        "' (this backend, which sandboxes it), not '" + backend + "'");
  }
  if (!policy.backend_sandboxed) {
    return Status::InvalidArg(
        who + "backend '" + policy.backend +
        "' has stub-sandbox=false: the model would run unsandboxed");
  }
  if (own) return Status();
  bool ready = false;
  if (FromTriton(
          TRITONSERVER_ServerModelIsReady(server, name.c_str(), -1, &ready))
          .ok() &&
      ready) {
    return Status::InvalidArg(
        who + "model '" + name +
        "' is loaded: a sandboxed model does not replace its config or "
        "files");
  }
  if (!by.empty()) {
    return Status::InvalidArg(
        who + "model '" + name + "' was loaded by model '" + by +
        "': a sandboxed model does not replace another's config or files");
  }
  if (InRepository(server, name)) {
    return Status::InvalidArg(
        who + "model '" + name +
        "' is in the model repository: a sandboxed model does not put its "
        "code under another model's name");
  }
  return Status();
}

Status
CheckSandboxedUnload(const SandboxedControl& policy, const std::string& name)
{
  if (LoadedBy(policy, name) == policy.model) return Status();
  return Status::InvalidArg(
      "tritonpy: unload_model('" + name +
      "') from a sandboxed model (stub-sandbox-model-control=true): a "
      "sandboxed model unloads only models it loaded");
}

json::Value
RunModelControl(
    TRITONSERVER_Server* server, const json::Value& msg,
    const SandboxedControl& policy)
{
  const std::string op = json::GetString(msg, "op");
  const std::string name = json::GetString(msg, "model_name");
  Status s;
  bool ready = false;
  if (name.empty()) {
    s = Status::InvalidArg("model_name must not be empty");
  } else if (op == "load") {
    std::string config = json::GetString(msg, "config");
    std::vector<std::pair<std::string, std::string>> files;
    const json::Value* fv = json::Find(msg, "files");
    if (fv != nullptr && fv->is_object()) {
      for (const auto& [key, value] : fv->items()) {
        if (key.rfind("file:", 0) != 0 || !value.is_string()) {
          s = Status::InvalidArg(
              "load_model: every key of 'files' must start with 'file:' "
              "and map to bytes, got '" +
              key + "'");
          break;
        }
        std::string content;
        s = Base64Decode(value.get_ref<const std::string&>(), &content);
        if (!s.ok()) break;
        files.emplace_back(key, std::move(content));
      }
    }
    if (s.ok() && !files.empty() && config.empty()) {
      s = Status::InvalidArg(
          "load_model: 'config' must be given together with 'files'");
    }
    if (s.ok() && policy.sandboxed) {
      s = CheckSandboxedLoad(server, policy, name, config);
    }
    const bool claim =
        s.ok() && policy.sandboxed && !config.empty() && policy.models;
    if (s.ok()) {
      std::vector<TRITONSERVER_Parameter*> params;
      if (!config.empty()) {
        params.push_back(TRITONSERVER_ParameterNew(
            "config", TRITONSERVER_PARAMETER_STRING, config.c_str()));
      }
      for (const auto& f : files) {
        params.push_back(TRITONSERVER_ParameterBytesNew(
            f.first.c_str(), f.second.data(), f.second.size()));
      }
      s = FromTriton(TRITONSERVER_ServerLoadModelWithParameters(
          server, name.c_str(),
          const_cast<const TRITONSERVER_Parameter**>(params.data()),
          params.size()));
      for (TRITONSERVER_Parameter* p : params) {
        if (p != nullptr) TRITONSERVER_ParameterDelete(p);
      }
    }
    // Also a load that failed: Triton may hold the name now, and it is
    // this model's to load again or unload.
    if (claim) policy.models->Loaded(name, policy.model);
  } else if (op == "unload") {
    if (policy.sandboxed) s = CheckSandboxedUnload(policy, name);
    if (s.ok()) {
      s = FromTriton(
          json::GetBool(msg, "unload_dependents")
              ? TRITONSERVER_ServerUnloadModelAndDependents(
                    server, name.c_str())
              : TRITONSERVER_ServerUnloadModel(server, name.c_str()));
    }
  } else if (op == "is_ready") {
    std::string v = json::GetString(msg, "model_version");
    int64_t version = -1;
    if (!v.empty()) {
      char* end = nullptr;
      version = std::strtoll(v.c_str(), &end, 10);
      if (end == nullptr || *end != '\0' || version < 0) {
        s = Status::InvalidArg("model_version '" + v + "' is not a number");
      }
    }
    if (s.ok()) {
      // An unknown model is simply not ready.
      Status r = FromTriton(TRITONSERVER_ServerModelIsReady(
          server, name.c_str(), version, &ready));
      if (!r.ok()) ready = false;
    }
  } else {
    s = Status::InvalidArg("unknown model control operation '" + op + "'");
  }
  if (!s.ok()) return ModelControlError(s.message());
  return {{"ok", true}, {"error", ""}, {"ready", ready}};
}

json::Value
ModelControlError(const std::string& message)
{
  // JSON writes a byte as at most 6: the frame stays inline.
  return {
      {"ok", false},
      {"error", proto::ClipText(message, proto::kMaxBackendText / 6)},
      {"ready", false}};
}

Status
SendModelControlDone(Channel* channel, uint64_t id, const json::Value& reply)
{
  if (channel == nullptr) return Status();
  const std::string text = json::Write(reply);
  return channel->Send(proto::ModelControlDoneFrame(id, text));
}

struct ModelControlWorker::Shared {
  struct Job {
    std::shared_ptr<Channel> channel;
    uint64_t id;
    std::shared_ptr<json::Value> msg;
  };

  Shared(
      TRITONSERVER_Server* server, std::string describe,
      SandboxedControl policy)
      : server(server), describe(std::move(describe)), policy(std::move(policy))
  {
  }

  // The thread's step: runs the next queued job, or waits for one.
  bool RunNext() EXCLUDES(mu);
  // Runs one job and answers it.
  void Answer(const Job& job) EXCLUDES(mu);

  TRITONSERVER_Server* const server;
  const std::string describe;
  const SandboxedControl policy;

  Mutex mu;
  std::deque<Job> jobs GUARDED_BY(mu);
  size_t running GUARDED_BY(mu) = 0;
  bool started GUARDED_BY(mu) = false;  // with the first job
  // Woken when a job is queued.
  WorkerThread thread;
};

bool
ModelControlWorker::Shared::RunNext()
{
  Job job;
  bool got = false;
  {
    MutexLock lock(&mu);
    if (!jobs.empty()) {
      job = std::move(jobs.front());
      jobs.pop_front();
      got = true;
    }
    running = got ? 1 : 0;
  }
  if (!got) return thread.Wait();
  Answer(job);
  job = Job();  // its channel is let go outside the lock
  MutexLock lock(&mu);
  running = 0;
  return true;
}

void
ModelControlWorker::Shared::Answer(const Job& job)
{
  // The barrier of this thread: a failure is the request's answer. A send
  // that fails means the stub is gone (the replies are clipped to fit a
  // frame): it needs no answer.
  const Status s = Guarded("model control", [&] {
    (void)SendModelControlDone(
        job.channel.get(), job.id, RunModelControl(server, *job.msg, policy));
    return Status();
  });
  if (s.ok()) return;
  TRITONPY_LOG_ERROR("tritonpy: " + describe + ": " + s.message());
  (void)Guarded("model control", [&] {
    (void)SendModelControlDone(
        job.channel.get(), job.id, ModelControlError(s.message()));
    return Status();
  });
}

ModelControlWorker::ModelControlWorker(
    TRITONSERVER_Server* server, std::string describe, SandboxedControl policy)
    : shared_(
          std::make_shared<Shared>(
              server, std::move(describe), std::move(policy)))
{
}

ModelControlWorker::~ModelControlWorker()
{
  Stop();
}

Status
ModelControlWorker::Submit(
    std::shared_ptr<Channel> channel, uint64_t id,
    std::shared_ptr<json::Value> msg)
{
  Shared* s = shared_.get();
  MutexLock lock(&s->mu);
  if (s->jobs.size() + s->running >= kMaxInFlight) {
    return Violation(
        "more than " + std::to_string(kMaxInFlight) +
        " MODEL_CONTROL requests in flight (load_model, unload_model "
        "and is_model_ready calls not answered yet)");
  }
  if (!s->started) {
    // The thread's own reference: a load it runs may end this instance.
    std::shared_ptr<Shared> keep = shared_;
    Shared* raw = keep.get();
    s->thread.Start(
        "tritonpy-control", "model control", [keep] { return keep->RunNext(); },
        [raw](const Status& failed) {
          TRITONPY_LOG_ERROR(
              "tritonpy: " + raw->describe +
              ": the model-control worker stopped: " + failed.message());
          return false;
        });
    s->started = true;
  }
  s->jobs.push_back({std::move(channel), id, std::move(msg)});
  s->thread.Wake();
  return Status();
}

void
ModelControlWorker::DropPending()
{
  MutexLock lock(&shared_->mu);
  shared_->jobs.clear();
}

void
ModelControlWorker::Stop()
{
  {
    MutexLock lock(&shared_->mu);
    shared_->jobs.clear();
  }
  shared_->thread.Stop();
  // On the worker itself (its load ends this instance): detached, it
  // finishes on its own.
  shared_->thread.Join();
}

}  // namespace tritonpy
