// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Glue between Status and the Triton C API: conversions both ways, and
// logging through the server's logger. Only code that runs inside
// tritonserver includes this header.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "triton_c_api/triton_api.h"
#include "util/error.h"

namespace tritonpy {

// Takes ownership of `err` (may be null) and returns it as a Status.
inline Status
FromTriton(TRITONSERVER_Error* err)
{
  if (err == nullptr) return Status();
  Status s = Status::Error(
      TRITONSERVER_ErrorCode(err), TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  return s;
}

// Takes ownership of `message` (a config, a model index): its JSON text in
// *json, then deletes it.
inline Status
TakeMessageJson(TRITONSERVER_Message* message, std::string* json)
{
  const char* buffer = nullptr;
  size_t byte_size = 0;
  Status s = FromTriton(
      TRITONSERVER_MessageSerializeToJson(message, &buffer, &byte_size));
  if (s.ok()) json->assign(buffer, byte_size);
  TRITONSERVER_Error* del = TRITONSERVER_MessageDelete(message);
  if (del != nullptr) TRITONSERVER_ErrorDelete(del);
  return s;
}

// A new TRITONSERVER_Error for `s`, or null when it is OK. The caller owns it.
inline TRITONSERVER_Error*
ToTriton(const Status& s)
{
  if (s.ok()) return nullptr;
  return TRITONSERVER_ErrorNew(s.code(), s.message().c_str());
}

// The levels Triton's log writes now, as LOG_LEVELS bits (bit n:
// TRITONSERVER_LogLevel n). Cheap: four reads of the logger's switches,
// which the logging endpoint (POST /v2/logging) may change at any time.
inline uint32_t
EnabledLogLevels()
{
  uint32_t enabled = 0;
  for (TRITONSERVER_LogLevel level :
       {TRITONSERVER_LOG_INFO, TRITONSERVER_LOG_WARN, TRITONSERVER_LOG_ERROR,
        TRITONSERVER_LOG_VERBOSE}) {
    if (TRITONSERVER_LogIsEnabled(level)) enabled |= 1u << level;
  }
  return enabled;
}

// TRITONPY_DEBUG set, not empty and not "0": the resource counters
// (docs/configuration.md, "Debug counters").
inline bool
DebugCountersEnabled()
{
  const char* debug = getenv("TRITONPY_DEBUG");
  return debug != nullptr && debug[0] != '\0' && std::string(debug) != "0";
}

inline void
LogAt(
    TRITONSERVER_LogLevel level, const char* file, int line,
    const std::string& msg)
{
  TRITONSERVER_Error* err =
      TRITONSERVER_LogMessage(level, file, line, msg.c_str());
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);
}

// Logs and deletes `err` (may be null): "tritonpy: <what>: <message>".
inline void
LogIfError(TRITONSERVER_Error* err, const char* what)
{
  if (err == nullptr) return;
  LogAt(
      TRITONSERVER_LOG_ERROR, __FILE__, __LINE__,
      std::string("tritonpy: ") + what + ": " + TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

// A WorkerThread's OnFailure (worker_thread.h) for loops whose rounds are
// independent: logs the failure as an error, and the next round tries
// again.
inline bool
LogAndGoOn(const Status& failed)
{
  LogAt(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, failed.message());
  return true;
}

}  // namespace tritonpy

#define TRITONPY_LOG(level, msg) \
  ::tritonpy::LogAt((level), __FILE__, __LINE__, (msg))
#define TRITONPY_LOG_INFO(msg) TRITONPY_LOG(TRITONSERVER_LOG_INFO, (msg))
#define TRITONPY_LOG_WARN(msg) TRITONPY_LOG(TRITONSERVER_LOG_WARN, (msg))
#define TRITONPY_LOG_ERROR(msg) TRITONPY_LOG(TRITONSERVER_LOG_ERROR, (msg))
#define TRITONPY_LOG_VERBOSE(msg) TRITONPY_LOG(TRITONSERVER_LOG_VERBOSE, (msg))

// Evaluates `expr` (a TRITONSERVER_Error*) and returns it as a Status from
// the enclosing function if it is an error.
#define TRITONPY_RETURN_IF_TRITON_ERROR(expr)                       \
  do {                                                              \
    TRITONSERVER_Error* TRITONPY_CONCAT(e_, __LINE__) = (expr);     \
    if (TRITONPY_CONCAT(e_, __LINE__) != nullptr) {                 \
      return ::tritonpy::FromTriton(TRITONPY_CONCAT(e_, __LINE__)); \
    }                                                               \
  } while (false)
