// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// JSON for the model config, the backend config and the JSON control frames
// of docs/protocol.md: nlohmann/json (header-only, MIT; the nlohmann-json
// build requirement). Values are ordered_json, so that objects are written
// with their keys in insertion order; integers stay integers (int64, or
// uint64 above INT64_MAX) and doubles are written in their shortest
// round-trip form, as Python's json and the official backend write them.
//
// The helpers below are the whole interface the backend relies on besides
// nlohmann's own: parsing into a Status, lookups that treat an absent or
// mistyped member as a default, writing that never throws, and numbers for
// messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "util/error.h"

namespace tritonpy {
namespace json {

using Value = nlohmann::ordered_json;

// Parses one JSON document (surrounding whitespace allowed). Nesting is
// limited to 256 levels. Errors read "invalid JSON: <what and where>".
Status Parse(const char* data, size_t size, Value* out);
inline Status
Parse(std::string_view text, Value* out)
{
  return Parse(text.data(), text.size(), out);
}

// The Status for an error of nlohmann's parser: "invalid JSON: <what and
// where>".
Status ParseError(const nlohmann::json::exception& e);

// The member `key` of `object`, or null when it is absent or `object` is
// not an object.
const Value* Find(const Value& object, std::string_view key);

// Member lookups with a default for absent or mistyped members.
std::string GetString(
    const Value& object, std::string_view key, const std::string& dflt = "");
bool GetBool(const Value& object, std::string_view key, bool dflt = false);
int64_t GetInt(const Value& object, std::string_view key, int64_t dflt = 0);

// Compact text. Invalid UTF-8 in strings becomes U+FFFD (the stub decodes
// frames strictly); NaN and infinities become null.
std::string Write(const Value& value);

// `number` for a message: shortest round-trip form, integral values without
// a fraction ("1", "0.5", "1e+300").
std::string FormatNumber(double number);

}  // namespace json
}  // namespace tritonpy
