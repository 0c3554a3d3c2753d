// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "util/json.h"

namespace tritonpy {
namespace json {

namespace {

constexpr int kMaxDepth = 256;

struct TooDeep {};

}  // namespace

Status
Parse(const char* data, size_t size, Value* out)
{
  // nlohmann parses without recursion, but writing and comparing recurse:
  // the depth is bounded here, once, for everything after.
  auto limit_depth = [](int depth, nlohmann::json::parse_event_t event,
                        Value&) {
    if (depth >= kMaxDepth &&
        (event == nlohmann::json::parse_event_t::object_start ||
         event == nlohmann::json::parse_event_t::array_start)) {
      throw TooDeep();
    }
    return true;
  };
  try {
    *out = Value::parse(data, data + size, limit_depth);
  } catch (const TooDeep&) {
    return Status::InvalidArg("invalid JSON: nesting too deep");
  } catch (const nlohmann::json::exception& e) {
    return ParseError(e);
  }
  return Status();
}

Status
ParseError(const nlohmann::json::exception& e)
{
  // what() is "[json.exception.parse_error.101] parse error at ...".
  std::string_view what = e.what();
  size_t tag_end = what.find("] ");
  if (tag_end != std::string_view::npos) what.remove_prefix(tag_end + 2);
  return Status::InvalidArg("invalid JSON: " + std::string(what));
}

const Value*
Find(const Value& object, std::string_view key)
{
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it != object.end() ? &*it : nullptr;
}

std::string
GetString(const Value& object, std::string_view key, const std::string& dflt)
{
  const Value* v = Find(object, key);
  return v != nullptr && v->is_string() ? v->get_ref<const std::string&>()
                                        : dflt;
}

bool
GetBool(const Value& object, std::string_view key, bool dflt)
{
  const Value* v = Find(object, key);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : dflt;
}

int64_t
GetInt(const Value& object, std::string_view key, int64_t dflt)
{
  const Value* v = Find(object, key);
  return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : dflt;
}

std::string
Write(const Value& value)
{
  return value.dump(-1, ' ', false, Value::error_handler_t::replace);
}

std::string
FormatNumber(double number)
{
  std::string text = Value(number).dump();
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) {
    text.resize(text.size() - 2);
  }
  return text;
}

}  // namespace json
}  // namespace tritonpy
