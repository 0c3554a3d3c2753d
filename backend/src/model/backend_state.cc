// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "model/backend_state.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <variant>

#include "bls/model_control.h"
#include "model/machine_memory.h"
#include "protocol/protocol.h"
#include "triton/triton_util.h"
#include "util/json.h"

namespace tritonpy {

namespace {

// Keys of the official Python backend (spelled as it spells them, see
// docs/configuration.md) that mean nothing here, and why. The hyphenated
// "shm-message-queue-size" is the spelling tritonpy once documented.
const std::map<std::string, const char*> kIgnoredCompatKeys = {
    {"shm-default-byte-size", "tritonpy uses memfd arenas that grow on demand"},
    {"shm-growth-byte-size", "tritonpy uses memfd arenas that grow on demand"},
    {"shm-region-prefix-name", "tritonpy's memfd arenas have no names"},
    {"shm_message_queue_size", "tritonpy's frames travel over a socket"},
    {"shm-message-queue-size", "tritonpy's frames travel over a socket"},
    {"thread-pool-size", "tritonpy's backend has no thread pool to size"}};

// Keys tritonserver passes to every backend.
const std::set<std::string> kServerKeys = {
    "default-max-batch-size", "backend-directory", "auto-complete-config",
    "min-compute-capability", "execution-policy"};

std::string
Trim(const std::string& s)
{
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

Status
ParseUnsigned(
    const std::string& key, const std::string& value, uint64_t max,
    uint64_t* out)
{
  if (value.empty() ||
      value.find_first_not_of("0123456789") != std::string::npos) {
    return Status::InvalidArg(
        "tritonpy: backend setting '" + key + "' must be a non-negative " +
        "integer, got '" + value + "'");
  }
  errno = 0;
  unsigned long long v = strtoull(value.c_str(), nullptr, 10);
  if (errno != 0 || v > max) {
    return Status::InvalidArg(
        "tritonpy: backend setting '" + key + "' is out of range: " + value);
  }
  *out = v;
  return Status();
}

// The directory of this shared library, where `tritonpy install` writes
// tritonpy.conf. It is not the backend's directory when tritonpy serves a
// Python-based backend (backends/<name>/model.py run by
// backends/python/libtriton_python.so).
std::string
LibraryDirectory()
{
  static const int anchor = 0;
  Dl_info info;
  if (dladdr(&anchor, &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Adds the key=value lines of `path`, if it exists, to *kv.
Status
ReadConfFile(const std::string& path, std::map<std::string, std::string>* kv)
{
  std::ifstream f(path);
  if (!f) return Status();
  std::stringstream ss;
  ss << f.rdbuf();
  return BackendState::ParseConfFile(ss.str(), kv).WithPrefix(path + ": ");
}

// The integer settings: key -> {field, least, most, why}. A value below
// `least` fails with "<key> must be at least <least>" and then `why`.
struct NumberKey {
  std::variant<
      int BackendSettings::*, uint64_t BackendSettings::*,
      uint64_t StubLimits::*>
      field;
  uint64_t least;
  uint64_t most;
  const char* why = "";
};
const std::map<std::string, NumberKey> kNumberKeys = {
    {"stub-timeout-seconds",
     {&BackendSettings::stub_timeout_seconds, 1, 86400}},
    {"arena-byte-size", {&BackendSettings::arena_byte_size, 4096, 1ull << 40}},
    {"stub-restart-limit", {&BackendSettings::stub_restart_limit, 0, 1000000}},
    {"instance-start-parallelism",
     {&BackendSettings::instance_start_parallelism, 1, 4096}},
    {"env-unpack-max-bytes",
     {&BackendSettings::env_unpack_max_bytes, 0, 1ull << 50}},
    {"env-unpack-max-members",
     {&BackendSettings::env_unpack_max_members, 0, 1ull << 40}},
    {"env-unpack-max-ratio",
     {&BackendSettings::env_unpack_max_ratio, 0, 1ull << 30}},
    {"stub-send-queue-bytes",
     {&BackendSettings::stub_send_queue_bytes, proto::kMaxFrame, 1ull << 40,
      " (one frame)"}},
    {"metric-max-families",
     {&BackendSettings::metric_max_families, 1, 1ull << 32}},
    {"metric-max-series", {&BackendSettings::metric_max_series, 1, 1ull << 40}},
    // The stub limits (StubLimits in arena.h).
    {"stub-max-arenas", {&StubLimits::max_arenas, 1, 1000000}},
    {"stub-max-arena-bytes",
     {&StubLimits::max_arena_bytes, 4096, UINT64_C(1) << 56}},
    // body_len is a u32; an inline body is at most MAX_FRAME.
    {"stub-max-body-bytes",
     {&StubLimits::max_body_bytes, proto::kMaxFrame, UINT32_MAX}},
    {"stub-max-bls-calls", {&StubLimits::max_bls_calls, 1, 1ull << 30}},
    {"stub-max-bls-bytes", {&StubLimits::max_bls_bytes, 4096, 1ull << 56}},
    {"stub-log-bytes-per-second",
     {&StubLimits::log_bytes_per_second, 1024, 1ull << 40}},
};

Status
ParseNumber(
    const std::string& key, const std::string& value, BackendSettings* settings)
{
  const NumberKey& k = kNumberKeys.at(key);
  uint64_t v;
  TRITONPY_RETURN_IF_ERROR(ParseUnsigned(key, value, k.most, &v));
  if (v < k.least) {
    return Status::InvalidArg(
        "tritonpy: " + key + " must be at least " + std::to_string(k.least) +
        k.why);
  }
  // The int fields' bounds fit an int.
  if (const auto* f = std::get_if<int BackendSettings::*>(&k.field)) {
    settings->*(*f) = static_cast<int>(v);
  } else if (
      const auto* f = std::get_if<uint64_t BackendSettings::*>(&k.field)) {
    settings->*(*f) = v;
  } else {
    settings->stub_limits.*std::get<uint64_t StubLimits::*>(k.field) = v;
  }
  return Status();
}

// The sandbox values (kSandboxKeys).
Status
ParseSandboxEnabled(
    const std::string& name, const std::string& text, const std::string&,
    StubSandbox* sandbox)
{
  return BackendState::ParseFlag(name, text, &sandbox->enabled);
}

Status
ParseSandboxMaxProcesses(
    const std::string& name, const std::string& text,
    const std::string& bound_prefix, StubSandbox* sandbox)
{
  uint64_t v;
  TRITONPY_RETURN_IF_ERROR(ParseUnsigned(name, text, 1u << 22, &v));
  if (v == 0) {
    return Status::InvalidArg(bound_prefix + name + " must be at least 1");
  }
  sandbox->max_processes = v;
  return Status();
}

Status
ParseSandboxAddressSpace(
    const std::string& name, const std::string& text, const std::string&,
    StubSandbox* sandbox)
{
  return ParseUnsigned(name, text, 1ull << 56, &sandbox->address_space_bytes);
}

Status
ParseSandboxUid(
    const std::string& name, const std::string& text,
    const std::string& bound_prefix, StubSandbox* sandbox)
{
  uint64_t v;
  TRITONPY_RETURN_IF_ERROR(ParseUnsigned(name, text, 4294967294u, &v));
  if (v == 0) {
    return Status::InvalidArg(
        bound_prefix + name +
        " must not be 0 (root ignores the process limit)");
  }
  sandbox->uid = static_cast<uint32_t>(v);
  return Status();
}

Status
ParseSandboxNetwork(
    const std::string& name, const std::string& text,
    const std::string& bound_prefix, StubSandbox* sandbox)
{
  if (text != "none" && text != "host") {
    return Status::InvalidArg(
        bound_prefix + name + " must be none or host, got '" + text + "'");
  }
  sandbox->own_network = text == "none";
  return Status();
}

Status
ParseSandboxTmpBytes(
    const std::string& name, const std::string& text,
    const std::string& bound_prefix, StubSandbox* sandbox)
{
  uint64_t v;
  TRITONPY_RETURN_IF_ERROR(ParseUnsigned(name, text, 1ull << 48, &v));
  if (v < 4096) {
    return Status::InvalidArg(bound_prefix + name + " must be at least 4096");
  }
  sandbox->tmp_bytes = v;
  return Status();
}

// Absolute paths, separated by ':'.
Status
ParsePaths(
    const std::string& name, const std::string& text,
    std::vector<std::string>* out)
{
  out->clear();
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(':', start);
    if (end == std::string::npos) end = text.size();
    const std::string path = text.substr(start, end - start);
    if (!path.empty() && path[0] != '/') {
      return Status::InvalidArg(
          "tritonpy: " + name + " takes absolute paths separated by ':', " +
          "got '" + path + "'");
    }
    if (!path.empty()) out->push_back(path);
    start = end + 1;
  }
  return Status();
}

Status
ParseSandboxReadPaths(
    const std::string& name, const std::string& text, const std::string&,
    StubSandbox* sandbox)
{
  return ParsePaths(name, text, &sandbox->read_paths);
}

Status
ParseSandboxWritePaths(
    const std::string& name, const std::string& text, const std::string&,
    StubSandbox* sandbox)
{
  return ParsePaths(name, text, &sandbox->write_paths);
}

const SandboxKey*
FindSandboxSetting(const std::string& key)
{
  for (const SandboxKey& k : kSandboxKeys) {
    if (key == k.setting) return &k;
  }
  return nullptr;
}

}  // namespace

bool
EnvAllowed(const std::vector<std::string>& allowlist, const std::string& name)
{
  for (const std::string& a : allowlist) {
    if (!a.empty() && a.back() == '*'
            ? name.compare(0, a.size() - 1, a, 0, a.size() - 1) == 0
            : name == a) {
      return true;
    }
  }
  return false;
}

// A root server's stubs take stub-sandbox-uid whatever the model, and
// the paths the operator opens: no model parameter.
const std::array<SandboxKey, 8> kSandboxKeys = {{
    {"stub-sandbox", "stub_sandbox", ParseSandboxEnabled},
    {"stub-sandbox-max-processes", "stub_sandbox_max_processes",
     ParseSandboxMaxProcesses},
    {"stub-sandbox-address-space-bytes", "stub_sandbox_address_space_bytes",
     ParseSandboxAddressSpace},
    {"stub-sandbox-uid", nullptr, ParseSandboxUid},
    {"stub-sandbox-network", "stub_sandbox_network", ParseSandboxNetwork},
    {"stub-sandbox-tmp-bytes", "stub_sandbox_tmp_bytes", ParseSandboxTmpBytes},
    {"stub-sandbox-read-paths", nullptr, ParseSandboxReadPaths},
    {"stub-sandbox-write-paths", nullptr, ParseSandboxWritePaths},
}};

void
BackendState::SetMemoryDefaults(uint64_t usable, StubLimits* limits)
{
  if (usable == 0) return;  // unknown: the fixed defaults stand
  // Within the keys' bounds (kNumberKeys).
  const uint64_t most = UINT64_C(1) << 56;
  const uint64_t bytes = usable < most ? usable : most;
  limits->max_arena_bytes = bytes < 4096 ? 4096 : bytes;
  limits->max_bls_bytes = bytes / 4 < 4096 ? 4096 : bytes / 4;
}

int
BackendState::StartDefault(int cpus, uint64_t usable)
{
  // A start is mostly waiting (a fork, IPC round trips, Triton's own work
  // per instance, a model's I/O), so a few overlap on each CPU; each may
  // hold the transient memory peak of its initialize(), hence one per GiB;
  // and a model of many instances does not run all their initialize()
  // at once.
  int most = 16;
  if (cpus > 0 && cpus * 4 < most) most = cpus * 4;
  const uint64_t gib = usable >> 30;
  if (usable != 0 && gib < static_cast<uint64_t>(most)) {
    most = static_cast<int>(gib);
  }
  return most < 1 ? 1 : most;
}

Status
BackendState::ParseFlag(
    const std::string& key, const std::string& value, bool* out)
{
  static const std::set<std::string> yes = {"true", "1", "yes", "on"};
  static const std::set<std::string> no = {"false", "0", "no", "off"};
  if (yes.count(value) == 0 && no.count(value) == 0) {
    return Status::InvalidArg(
        "tritonpy: '" + key + "' must be true or false, got '" + value + "'");
  }
  *out = yes.count(value) != 0;
  return Status();
}

// A duration in seconds: digits with an optional fraction ("5", "0.5").
Status
BackendState::ParseSeconds(
    const std::string& key, const std::string& value, double* out)
{
  size_t dot = value.find('.');
  std::string whole = value.substr(0, dot);
  std::string frac = dot == std::string::npos ? "" : value.substr(dot + 1);
  bool ok = !value.empty() && value != "." && whole.size() <= 5 &&
            frac.size() <= 6 &&
            whole.find_first_not_of("0123456789") == std::string::npos &&
            frac.find_first_not_of("0123456789") == std::string::npos;
  double v = ok ? strtod(value.c_str(), nullptr) : -1;
  if (!ok || v > 86400) {
    return Status::InvalidArg(
        "tritonpy: '" + key + "' must be a number of seconds from 0 to " +
        "86400, got '" + value + "'");
  }
  *out = v;
  return Status();
}

Status
BackendState::ParseModules(
    const std::string& key, const std::string& value,
    std::vector<std::string>* modules)
{
  std::stringstream names(value);
  std::string name;
  while (std::getline(names, name, ',')) {
    name = Trim(name);
    if (name.empty()) continue;
    bool ok = name.front() != '.' && name.back() != '.' &&
              name.find("..") == std::string::npos;
    for (char c : name) {
      ok = ok && (isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                  c == '.' || static_cast<unsigned char>(c) >= 0x80);
    }
    if (!ok) {
      return Status::InvalidArg(
          key + " takes module names separated by commas; " + "got '" + name +
          "'");
    }
    if (std::find(modules->begin(), modules->end(), name) == modules->end()) {
      modules->push_back(name);
    }
  }
  return Status();
}

Status
BackendState::ParseConfFile(
    const std::string& text, std::map<std::string, std::string>* out)
{
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    line = Trim(line);
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos || Trim(line.substr(0, eq)).empty()) {
      return Status::InvalidArg(
          "tritonpy: tritonpy.conf line " + std::to_string(lineno) +
          ": expected key=value");
    }
    (*out)[Trim(line.substr(0, eq))] = Trim(line.substr(eq + 1));
  }
  return Status();
}

Status
BackendState::ApplySettings(
    const std::map<std::string, std::string>& kv, const std::string& origin,
    BackendSettings* settings, bool log)
{
  for (const auto& [key, value] : kv) {
    if (key == "python-executable") {
      if (value.empty()) {
        return Status::InvalidArg(
            "tritonpy: python-executable must not be empty");
      }
      settings->python_executable = value;
    } else if (key == "finalize-grace-seconds") {
      TRITONPY_RETURN_IF_ERROR(
          ParseSeconds(key, value, &settings->finalize_grace_seconds));
    } else if (key == "ready-timeout-seconds") {
      double v;
      TRITONPY_RETURN_IF_ERROR(ParseSeconds(key, value, &v));
      if (v <= 0) {
        return Status::InvalidArg(
            "tritonpy: ready-timeout-seconds must be more than 0");
      }
      settings->ready_timeout_seconds = v;
    } else if (key == "stub-memory-interval-seconds") {
      TRITONPY_RETURN_IF_ERROR(
          ParseSeconds(key, value, &settings->stub_memory_interval_seconds));
    } else if (key == "execute-timeout-seconds") {
      TRITONPY_RETURN_IF_ERROR(
          ParseSeconds(key, value, &settings->execute_timeout_seconds));
    } else if (key == "env-cache-dir") {
      if (value.empty() || value[0] != '/') {
        return Status::InvalidArg(
            "tritonpy: env-cache-dir must be an absolute path, got '" + value +
            "'");
      }
      settings->env_cache_dir = value;
    } else if (kNumberKeys.count(key) != 0) {
      TRITONPY_RETURN_IF_ERROR(ParseNumber(key, value, settings));
    } else if (key == "stub-model-control") {
      if (value != "true" && value != "false") {
        return Status::InvalidArg(
            "tritonpy: backend setting 'stub-model-control' must be true or "
            "false, got '" +
            value + "'");
      }
      settings->model_control = value == "true";
    } else if (key == "stub-sandbox-model-control") {
      TRITONPY_RETURN_IF_ERROR(ParseFlag(
          "stub-sandbox-model-control", value,
          &settings->sandbox_model_control));
    } else if (key == "stub-python-logging") {
      TRITONPY_RETURN_IF_ERROR(
          ParseFlag("stub-python-logging", value, &settings->python_logging));
    } else if (const SandboxKey* k = FindSandboxSetting(key); k != nullptr) {
      TRITONPY_RETURN_IF_ERROR(
          k->parse(key, value, "tritonpy: ", &settings->sandbox));
    } else if (key == "stub-fork") {
      TRITONPY_RETURN_IF_ERROR(ParseFlag(key, value, &settings->stub_fork));
    } else if (key == "stub-preload") {
      settings->stub_preload.clear();
      TRITONPY_RETURN_IF_ERROR(ParseModules(key, value, &settings->stub_preload)
                                   .WithPrefix("tritonpy: "));
    } else if (key == "stub-env-allowlist") {
      settings->env_allowlist.clear();
      std::stringstream names(value);
      std::string name;
      while (std::getline(names, name, ',')) {
        name = Trim(name);
        if (name.empty()) continue;
        if (name.find_first_of("= ") != std::string::npos ||
            name.find('*') < name.size() - 1) {
          return Status::InvalidArg(
              "tritonpy: stub-env-allowlist takes variable names, or a " +
              std::string("prefix ending in '*', separated by commas; got '") +
              name + "'");
        }
        settings->env_allowlist.push_back(name);
      }
    } else if (
        auto compat = kIgnoredCompatKeys.find(key);
        compat != kIgnoredCompatKeys.end()) {
      if (log) {
        TRITONPY_LOG_INFO(
            "tritonpy: " + key + " (" + origin + ") is accepted for " +
            "compatibility and ignored: " + compat->second);
      }
    } else if (kServerKeys.count(key) != 0) {
      // Always present; nothing to do.
    } else if (log) {
      TRITONPY_LOG_WARN(
          "tritonpy: unknown backend setting '" + key + "' (" + origin +
          ") is ignored");
    }
  }
  return Status();
}

Status
BackendState::Create(
    TRITONBACKEND_Backend* backend, std::unique_ptr<BackendState>* out)
{
  std::unique_ptr<BackendState> state(new BackendState());
  state->sandboxed_models_ = std::make_shared<SandboxedModels>();
  const char* name = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(TRITONBACKEND_BackendName(backend, &name));
  state->name_ = name != nullptr ? name : "tritonpy";

  // tritonpy.conf beside the shared library, then the backend directory's
  // own when that is another directory (a Python-based backend).
  std::map<std::string, std::string> file_kv;
  std::string library_dir = LibraryDirectory();
  if (!library_dir.empty()) {
    TRITONPY_RETURN_IF_ERROR(
        ReadConfFile(library_dir + "/tritonpy.conf", &file_kv));
  }
  TRITONBACKEND_ArtifactType artifact_type;
  const char* location = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_BackendArtifacts(backend, &artifact_type, &location));
  if (artifact_type == TRITONBACKEND_ARTIFACT_FILESYSTEM &&
      location != nullptr) {
    state->directory_ = location;
    if (state->directory_ != library_dir) {
      TRITONPY_RETURN_IF_ERROR(
          ReadConfFile(state->directory_ + "/tritonpy.conf", &file_kv));
    }
  }

  // --backend-config: {"cmdline": {"key": "value", ...}}.
  std::map<std::string, std::string> cmd_kv;
  TRITONSERVER_Message* message = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_BackendConfig(backend, &message));
  const char* buffer = nullptr;
  size_t byte_size = 0;
  // The message is owned by Triton.
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONSERVER_MessageSerializeToJson(message, &buffer, &byte_size));
  if (byte_size > 0) {
    json::Value doc;
    TRITONPY_RETURN_IF_ERROR(
        json::Parse(buffer, byte_size, &doc)
            .WithPrefix("tritonpy: backend config: "));
    const json::Value* cmdline = json::Find(doc, "cmdline");
    if (cmdline != nullptr && cmdline->is_object()) {
      for (const auto& [key, value] : cmdline->items()) {
        cmd_kv[key] =
            value.is_string() ? value.get<std::string>() : json::Write(value);
      }
    }
  }

  // The memory caps' defaults follow the memory the server may use.
  const MachineMemory memory = ReadMachineMemory();
  SetMemoryDefaults(memory.usable(), &state->settings_.stub_limits);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  state->settings_.instance_start_parallelism = StartDefault(
      sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 0,
      memory.usable());
  TRITONPY_RETURN_IF_ERROR(
      ApplySettings(file_kv, "tritonpy.conf", &state->settings_, true));
  TRITONPY_RETURN_IF_ERROR(
      ApplySettings(cmd_kv, "--backend-config", &state->settings_, true));

  const BackendSettings& s = state->settings_;
  state->metric_store_->SetLimits(s.metric_max_families, s.metric_max_series);
  state->memory_reporter_ = std::make_unique<MemoryReporter>(
      state->metric_store_.get(), s.stub_memory_interval_seconds,
      DebugCountersEnabled());
  if (s.stub_fork) {
    state->templates_ = std::make_unique<StubTemplates>(
        s.stub_timeout_seconds, state->memory_reporter_.get());
  }
  TRITONPY_LOG_INFO(
      "tritonpy: backend '" + state->name_ +
      "': python-executable=" + s.python_executable +
      " stub-timeout-seconds=" + std::to_string(s.stub_timeout_seconds) +
      " arena-byte-size=" + std::to_string(s.arena_byte_size) +
      " finalize-grace-seconds=" +
      json::FormatNumber(s.finalize_grace_seconds) +
      " ready-timeout-seconds=" + json::FormatNumber(s.ready_timeout_seconds) +
      " execute-timeout-seconds=" +
      json::FormatNumber(s.execute_timeout_seconds) + " stub-restart-limit=" +
      std::to_string(s.stub_restart_limit) + " instance-start-parallelism=" +
      std::to_string(s.instance_start_parallelism) +
      (s.env_cache_dir.empty() ? "" : " env-cache-dir=" + s.env_cache_dir) +
      " env-unpack-max-bytes=" + std::to_string(s.env_unpack_max_bytes) +
      " env-unpack-max-members=" + std::to_string(s.env_unpack_max_members) +
      " env-unpack-max-ratio=" + std::to_string(s.env_unpack_max_ratio) +
      " stub-send-queue-bytes=" + std::to_string(s.stub_send_queue_bytes) +
      " stub-model-control=" + (s.model_control ? "true" : "false") +
      " stub-sandbox-model-control=" +
      (s.sandbox_model_control ? "true" : "false") +
      " stub-python-logging=" + (s.python_logging ? "true" : "false") +
      " metric-max-families=" + std::to_string(s.metric_max_families) +
      " metric-max-series=" + std::to_string(s.metric_max_series) +
      " stub-fork=" + (s.stub_fork ? "true" : "false") + " stub-preload=" +
      JoinNames(s.stub_preload) + " stub-memory-interval-seconds=" +
      json::FormatNumber(s.stub_memory_interval_seconds) +
      (s.sandbox.enabled
           ? std::string(" stub-sandbox=true stub-sandbox-network=") +
                 (s.sandbox.own_network ? "none" : "host") +
                 " stub-sandbox-tmp-bytes=" +
                 std::to_string(s.sandbox.tmp_bytes)
           : "") +
      (s.env_allowlist.empty()
           ? ""
           : " stub-env-allowlist=" + std::to_string(s.env_allowlist.size()) +
                 " names"));
  const StubLimits& l = s.stub_limits;
  TRITONPY_LOG_INFO(
      "tritonpy: backend '" + state->name_ +
      "': stub-max-arena-bytes=" + std::to_string(l.max_arena_bytes) +
      " stub-max-bls-calls=" + std::to_string(l.max_bls_calls) +
      " stub-max-bls-bytes=" + std::to_string(l.max_bls_bytes) +
      " stub-log-bytes-per-second=" + std::to_string(l.log_bytes_per_second) +
      " (" + memory.Describe() + ")");
  *out = std::move(state);
  return Status();
}

}  // namespace tritonpy
