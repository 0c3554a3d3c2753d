// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "exec_env.h"

#include <sys/wait.h>

#include <set>
#include <vector>

#include "json.h"
#include "triton_util.h"

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
  for (const auto& [key, value] : set.members()) drop.insert(key);
  for (const json::Value& key : unset.items()) drop.insert(key.as_string());
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    if (drop.count(entry.substr(0, entry.find('='))) == 0) env.push_back(entry);
  }
  for (const auto& [key, value] : set.members()) {
    env.push_back(key + "=" + value.as_string());
  }
  return env;
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
  std::string out, err;
  int status = 0;
  TRITONPY_RETURN_IF_ERROR(
      RunCommand(args, &out, &err, &status).WithPrefix(prefix));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
      why = Tail(err, 2000);  // the helper's own message
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      why = "cannot run python-executable '" + settings.python_executable +
            "' to prepare it";
    } else {
      why = "`" + settings.python_executable + " -m tritonpy.exec_env` " +
            StubProcess::DescribeStatus(status) + ": " + Tail(err, 2000);
    }
    return Status::InvalidArg(prefix + why);
  }

  json::Value doc;
  Status s = json::Parse(LastLine(out), &doc);
  const json::Value* set = s.ok() ? doc.Find("set") : nullptr;
  const json::Value* unset = s.ok() ? doc.Find("unset") : nullptr;
  if (!s.ok() || !doc.is_object() || set == nullptr || !set->is_object() ||
      unset == nullptr || !unset->is_array() ||
      doc.GetString("python", "").empty()) {
    return Status::Internal(
        prefix + "unexpected answer from tritonpy.exec_env: " + Tail(out, 500));
  }
  for (const auto& member : set->members()) {
    if (!member.second.is_string()) {
      return Status::Internal(prefix + "bad variable " + member.first);
    }
  }
  for (const json::Value& key : unset->items()) {
    if (!key.is_string()) return Status::Internal(prefix + "bad unset list");
  }
  launch->python = doc.GetString("python", "");
  launch->env = StubEnvironment(*set, *unset);

  std::string how;
  if (doc.GetBool("extracted", false)) {
    const json::Value* seconds = doc.Find("seconds");
    how = ", unpacked from " + doc.GetString("path", "") + " in " +
          (seconds != nullptr ? seconds->Serialize() : std::string("?")) + " s";
  } else if (doc.GetBool("archive", false)) {
    how = ", unpacked earlier from " + doc.GetString("path", "") + " (reused)";
  }
  TRITONPY_LOG_INFO(
      "tritonpy: model '" + model + "': stubs run on " + launch->python +
      " (Python " + doc.GetString("version", "?") +
      ") of the execution environment " + doc.GetString("root", "") + how +
      (doc.GetBool("lent", false)
           ? "; tritonpy lent to it by " + settings.python_executable
           : std::string()));
  return Status();
}

}  // namespace tritonpy
