// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// A small JSON DOM, parser and writer: enough for the model config, the
// backend config and the JSON control frames of docs/protocol.md. Objects
// keep their keys in input order. Numbers remember whether they were
// written as integers so that int64 values survive a round trip.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "error.h"

namespace tritonpy {
namespace json {

class Value {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };

  Value() = default;
  static Value Null() { return Value(); }
  static Value Bool(bool b);
  static Value Int(int64_t i);
  // An unsigned integer; values above INT64_MAX keep full precision.
  static Value Uint(uint64_t u);
  static Value Double(double d);
  static Value String(std::string s);
  static Value Array();
  static Value Object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_number() const
  {
    return type_ == Type::kInt || type_ == Type::kDouble;
  }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return int_; }
  uint64_t as_uint() const { return static_cast<uint64_t>(int_); }
  // True for an integer above INT64_MAX (as_int() is then meaningless).
  bool is_big_uint() const { return big_uint_; }
  double as_double() const
  {
    if (type_ != Type::kInt) return double_;
    return big_uint_ ? static_cast<double>(as_uint())
                     : static_cast<double>(int_);
  }
  const std::string& as_string() const { return string_; }

  // Arrays.
  const std::vector<Value>& items() const { return items_; }
  void Append(Value v) { items_.push_back(std::move(v)); }

  // Objects. Find returns null when the key is absent (or this is not an
  // object). Set replaces an existing key.
  const std::vector<std::pair<std::string, Value>>& members() const
  {
    return members_;
  }
  const Value* Find(const std::string& key) const;
  void Set(const std::string& key, Value v);
  // Appends a member without looking for an existing key (parser use).
  void AddMember(std::string key, Value v)
  {
    members_.emplace_back(std::move(key), std::move(v));
  }

  // Convenience lookups with defaults for absent or mistyped members.
  std::string GetString(
      const std::string& key, const std::string& dflt = "") const;
  bool GetBool(const std::string& key, bool dflt = false) const;
  int64_t GetInt(const std::string& key, int64_t dflt = 0) const;

  // Compact serialization.
  std::string Serialize() const;

  bool operator==(const Value& other) const;
  bool operator!=(const Value& other) const { return !(*this == other); }

 private:
  void SerializeTo(std::string* out) const;

  Type type_ = Type::kNull;
  bool bool_ = false;
  int64_t int_ = 0;
  bool big_uint_ = false;
  double double_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

// Parses one JSON document (surrounding whitespace allowed). Nesting is
// limited to 256 levels.
Status Parse(const char* data, size_t size, Value* out);
inline Status
Parse(const std::string& s, Value* out)
{
  return Parse(s.data(), s.size(), out);
}

// Appends `s` as a quoted JSON string.
void AppendQuoted(const std::string& s, std::string* out);

}  // namespace json
}  // namespace tritonpy
