// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "model/exec_env.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>
#include <vector>

#include "process/child_launch.h"
#include "triton/triton_util.h"
#include "util/json.h"
#include "util/mutex.h"

extern char** environ;

namespace tritonpy {

namespace {

// The last non-empty line of `text`, without surrounding blanks.
std::string
LastLine(const std::string& text)
{
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  return text.substr(start, end - start + 1);
}

// At most the last `limit` bytes of `text`, trimmed.
std::string
Tail(const std::string& text, size_t limit)
{
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  size_t start = end + 1 > limit ? end + 1 - limit : 0;
  size_t first = text.find_first_not_of(" \t\r\n", start);
  return text.substr(first, end - first + 1);
}

// The server's environment with the helper's changes: the keys of `set`
// and `unset` dropped, then `set` appended.
std::vector<std::string>
StubEnvironment(const json::Value& set, const json::Value& unset)
{
  std::set<std::string> drop;
  for (const auto& [key, value] : set.items()) drop.insert(key);
  for (const json::Value& key : unset) drop.insert(key.get<std::string>());
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    if (drop.count(entry.substr(0, entry.find('='))) == 0) env.push_back(entry);
  }
  for (const auto& [key, value] : set.items()) {
    env.push_back(key + "=" + value.get<std::string>());
  }
  return env;
}

// The archives this server process has announced with the official
// backend's verbose line "Extracting Python execution env <path>", by
// canonical path, with the modification time each had then. The official
// backend extracts (and says so) when an archive is new to the process or
// its modification time, in whole seconds, changed; tritonpy's cache may
// reuse a tree unpacked before, but the line follows the same rule.
class ArchivesSeen {
 public:
  // Whether `path` last modified at `mtime` is new to the process; it is
  // seen from now on.
  bool Note(const std::string& path, time_t mtime) EXCLUDES(mu_)
  {
    MutexLock lock(&mu_);
    auto [it, inserted] = mtimes_.try_emplace(path, mtime);
    if (inserted) return true;
    if (it->second == mtime) return false;
    it->second = mtime;
    return true;
  }

 private:
  Mutex mu_;
  std::map<std::string, time_t> mtimes_ GUARDED_BY(mu_);
};

// Logs the official line for the archive `path`, with tritonpy's detail
// (the helper's answer `doc`, which took `took` seconds) after it, unless
// this process has seen the archive at its current modification time.
void
LogExtraction(
    const std::string& path, const json::Value& doc, const std::string& took)
{
  static ArchivesSeen seen;
  char canonical[PATH_MAX];
  struct stat st;
  if (realpath(path.c_str(), canonical) == nullptr ||
      stat(canonical, &st) != 0 || !seen.Note(canonical, st.st_mtime)) {
    return;
  }
  const std::string root = json::GetString(doc, "root");
  TRITONPY_LOG_VERBOSE(
      std::string("Extracting Python execution env ") + canonical +
      (json::GetBool(doc, "extracted")
           ? " (tritonpy: unpacked into " + root + " in " + took + " s)"
           : " (tritonpy: the same content was unpacked before into " + root +
                 ": reused)"));
}

}  // namespace

Status
PrepareExecutionEnv(
    const BackendSettings& settings, const std::string& model,
    const std::string& model_dir, const std::string& value, StubLaunch* launch)
{
  const std::string prefix =
      "tritonpy: model '" + model + "': EXECUTION_ENV_PATH '" + value + "': ";
  std::vector<std::string> args = {
      settings.python_executable,
      "-m",
      "tritonpy.exec_env",
      "--path",
      value,
      "--model-dir",
      model_dir};
  if (!settings.env_cache_dir.empty()) {
    args.push_back("--cache-dir");
    args.push_back(settings.env_cache_dir);
  }
  for (const auto& [option, value] :
       {std::pair{"--max-bytes", settings.env_unpack_max_bytes},
        std::pair{"--max-members", settings.env_unpack_max_members},
        std::pair{"--max-ratio", settings.env_unpack_max_ratio}}) {
    args.push_back(option);
    args.push_back(std::to_string(value));
  }
  // The helper runs the environment's own interpreter (the probe): it
  // runs as a stub of the model would, in the model's sandbox with the
  // allowlisted environment, and bounds the probe by stub-timeout-seconds.
  args.push_back("--probe-timeout");
  args.push_back(std::to_string(settings.stub_timeout_seconds));
  StubLaunch helper;
  helper.sandbox = launch->sandbox;
  // A sandboxed model's environment lies where its stubs may read anyway:
  // naming it opens nothing else of the host to them.
  if (helper.sandbox.enabled) {
    for (const std::string& path : helper.sandbox.read_paths) {
      args.push_back("--within");
      args.push_back(path);
    }
  }
  if (helper.sandbox.enabled && geteuid() == 0) {
    args.push_back("--sandbox-real-uid");
    args.push_back(std::to_string(kSandboxRealUid));
  }
  if (!settings.env_allowlist.empty()) {
    helper.env_filtered = true;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string entry = *e;
      if (EnvAllowed(
              settings.env_allowlist, entry.substr(0, entry.find('=')))) {
        helper.env.push_back(entry);
      }
    }
  }
  std::string out, err;
  int status = 0;
  TRITONPY_RETURN_IF_ERROR(
      RunCommand(args, helper, &out, &err, &status).WithPrefix(prefix));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
      why = Tail(err, 2000);  // the helper's own message
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      why = "cannot run python-executable '" + settings.python_executable +
            "' to prepare it";
    } else {
      why = "`" + settings.python_executable + " -m tritonpy.exec_env` " +
            DescribeWaitStatus(status) + ": " + Tail(err, 2000);
    }
    return Status::InvalidArg(prefix + why);
  }

  json::Value doc;
  Status s = json::Parse(LastLine(out), &doc);
  const json::Value* set = s.ok() ? json::Find(doc, "set") : nullptr;
  const json::Value* unset = s.ok() ? json::Find(doc, "unset") : nullptr;
  if (!s.ok() || !doc.is_object() || set == nullptr || !set->is_object() ||
      unset == nullptr || !unset->is_array() ||
      json::GetString(doc, "python").empty()) {
    return Status::Internal(
        prefix + "unexpected answer from tritonpy.exec_env: " + Tail(out, 500));
  }
  for (const auto& [name, value] : set->items()) {
    if (!value.is_string()) {
      return Status::Internal(prefix + "bad variable " + name);
    }
  }
  for (const json::Value& key : *unset) {
    if (!key.is_string()) return Status::Internal(prefix + "bad unset list");
  }
  launch->python = json::GetString(doc, "python");
  launch->env = StubEnvironment(*set, *unset);
  // A sandboxed stub reads the environment (tritonpy/stub/sandbox.py).
  launch->sandbox.read_paths.push_back(json::GetString(doc, "root"));

  const std::string changed = json::GetString(doc, "changed");
  if (!changed.empty()) {
    TRITONPY_LOG_WARN(
        "tritonpy: model '" + model + "': the unpacked environment " +
        json::GetString(doc, "root") + " was changed since it was unpacked (" +
        changed + "): unpacked again from " + json::GetString(doc, "path"));
  }
  const json::Value* seconds = json::Find(doc, "seconds");
  const std::string took =
      seconds != nullptr ? json::Write(*seconds) : std::string("?");
  const std::string path = json::GetString(doc, "path");
  std::string how;
  if (json::GetBool(doc, "archive")) {
    LogExtraction(path, doc, took);
    how = json::GetBool(doc, "extracted")
              ? ", unpacked from " + path + " in " + took + " s"
              : ", unpacked earlier from " + path + " (reused)";
  }
  TRITONPY_LOG_INFO(
      "tritonpy: model '" + model + "': stubs run on " + launch->python +
      " (Python " + json::GetString(doc, "version", "?") +
      ") of the execution environment " + json::GetString(doc, "root") + how +
      (json::GetBool(doc, "activated") ? ", activated by its bin/activate"
                                       : std::string()) +
      (json::GetBool(doc, "lent")
           ? "; tritonpy lent to it by " + settings.python_executable
           : std::string()));
  return Status();
}

}  // namespace tritonpy
