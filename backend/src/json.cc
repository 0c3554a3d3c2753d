// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tritonpy {
namespace json {

Value
Value::Bool(bool b)
{
  Value v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}

Value
Value::Int(int64_t i)
{
  Value v;
  v.type_ = Type::kInt;
  v.int_ = i;
  return v;
}

Value
Value::Uint(uint64_t u)
{
  Value v;
  v.type_ = Type::kInt;
  v.int_ = static_cast<int64_t>(u);
  v.big_uint_ = u > static_cast<uint64_t>(INT64_MAX);
  return v;
}

Value
Value::Double(double d)
{
  Value v;
  v.type_ = Type::kDouble;
  v.double_ = d;
  return v;
}

Value
Value::String(std::string s)
{
  Value v;
  v.type_ = Type::kString;
  v.string_ = std::move(s);
  return v;
}

Value
Value::Array()
{
  Value v;
  v.type_ = Type::kArray;
  return v;
}

Value
Value::Object()
{
  Value v;
  v.type_ = Type::kObject;
  return v;
}

const Value*
Value::Find(const std::string& key) const
{
  if (type_ != Type::kObject) return nullptr;
  // Last one wins on duplicate keys, as in most parsers.
  const Value* found = nullptr;
  for (const auto& m : members_) {
    if (m.first == key) found = &m.second;
  }
  return found;
}

void
Value::Set(const std::string& key, Value v)
{
  for (auto& m : members_) {
    if (m.first == key) {
      m.second = std::move(v);
      return;
    }
  }
  members_.emplace_back(key, std::move(v));
}

std::string
Value::GetString(const std::string& key, const std::string& dflt) const
{
  const Value* v = Find(key);
  return (v != nullptr && v->is_string()) ? v->as_string() : dflt;
}

bool
Value::GetBool(const std::string& key, bool dflt) const
{
  const Value* v = Find(key);
  return (v != nullptr && v->is_bool()) ? v->as_bool() : dflt;
}

int64_t
Value::GetInt(const std::string& key, int64_t dflt) const
{
  const Value* v = Find(key);
  return (v != nullptr && v->is_int()) ? v->as_int() : dflt;
}

bool
Value::operator==(const Value& o) const
{
  if (is_number() && o.is_number()) {
    if (is_int() && o.is_int()) {
      return int_ == o.int_ && big_uint_ == o.big_uint_;
    }
    return as_double() == o.as_double();
  }
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::kNull:
      return true;
    case Type::kBool:
      return bool_ == o.bool_;
    case Type::kString:
      return string_ == o.string_;
    case Type::kArray:
      return items_ == o.items_;
    case Type::kObject: {
      // Key order does not matter for equality.
      if (members_.size() != o.members_.size()) return false;
      for (const auto& m : members_) {
        const Value* other = o.Find(m.first);
        if (other == nullptr || *other != m.second) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

void
AppendQuoted(const std::string& s, std::string* out)
{
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void
Value::SerializeTo(std::string* out) const
{
  switch (type_) {
    case Type::kNull:
      out->append("null");
      break;
    case Type::kBool:
      out->append(bool_ ? "true" : "false");
      break;
    case Type::kInt:
      out->append(big_uint_ ? std::to_string(as_uint()) : std::to_string(int_));
      break;
    case Type::kDouble: {
      if (!std::isfinite(double_)) {
        out->append("null");  // JSON has no NaN/Inf.
        break;
      }
      char buf[32];
      snprintf(buf, sizeof(buf), "%.17g", double_);
      out->append(buf);
      break;
    }
    case Type::kString:
      AppendQuoted(string_, out);
      break;
    case Type::kArray:
      out->push_back('[');
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out->push_back(',');
        items_[i].SerializeTo(out);
      }
      out->push_back(']');
      break;
    case Type::kObject:
      out->push_back('{');
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendQuoted(members_[i].first, out);
        out->push_back(':');
        members_[i].second.SerializeTo(out);
      }
      out->push_back('}');
      break;
  }
}

std::string
Value::Serialize() const
{
  std::string out;
  SerializeTo(&out);
  return out;
}

namespace {

constexpr int kMaxDepth = 256;

class Parser {
 public:
  Parser(const char* data, size_t size) : p_(data), end_(data + size) {}

  Status ParseDocument(Value* out)
  {
    SkipSpace();
    TRITONPY_RETURN_IF_ERROR(ParseValue(out, 0));
    SkipSpace();
    if (p_ != end_) return Fail("trailing characters after the document");
    return Status();
  }

 private:
  Status Fail(const std::string& what)
  {
    return Status::InvalidArg("invalid JSON: " + what);
  }

  void SkipSpace()
  {
    while (p_ < end_ &&
           (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) {
      ++p_;
    }
  }

  bool Consume(const char* lit)
  {
    size_t n = strlen(lit);
    if (static_cast<size_t>(end_ - p_) < n || memcmp(p_, lit, n) != 0) {
      return false;
    }
    p_ += n;
    return true;
  }

  Status ParseValue(Value* out, int depth)
  {
    if (depth > kMaxDepth) return Fail("nesting too deep");
    if (p_ == end_) return Fail("unexpected end of input");
    switch (*p_) {
      case '{':
        return ParseObject(out, depth);
      case '[':
        return ParseArray(out, depth);
      case '"': {
        std::string s;
        TRITONPY_RETURN_IF_ERROR(ParseString(&s));
        *out = Value::String(std::move(s));
        return Status();
      }
      case 't':
        if (!Consume("true")) return Fail("bad literal");
        *out = Value::Bool(true);
        return Status();
      case 'f':
        if (!Consume("false")) return Fail("bad literal");
        *out = Value::Bool(false);
        return Status();
      case 'n':
        if (!Consume("null")) return Fail("bad literal");
        *out = Value::Null();
        return Status();
      default:
        return ParseNumber(out);
    }
  }

  Status ParseObject(Value* out, int depth)
  {
    ++p_;  // '{'
    *out = Value::Object();
    SkipSpace();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return Status();
    }
    while (true) {
      SkipSpace();
      if (p_ == end_ || *p_ != '"') return Fail("expected a key");
      std::string key;
      TRITONPY_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (p_ == end_ || *p_ != ':') return Fail("expected ':'");
      ++p_;
      SkipSpace();
      Value v;
      TRITONPY_RETURN_IF_ERROR(ParseValue(&v, depth + 1));
      out->AddMember(std::move(key), std::move(v));
      SkipSpace();
      if (p_ == end_) return Fail("unterminated object");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return Status();
      }
      return Fail("expected ',' or '}'");
    }
  }

  Status ParseArray(Value* out, int depth)
  {
    ++p_;  // '['
    *out = Value::Array();
    SkipSpace();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return Status();
    }
    while (true) {
      SkipSpace();
      Value v;
      TRITONPY_RETURN_IF_ERROR(ParseValue(&v, depth + 1));
      out->Append(std::move(v));
      SkipSpace();
      if (p_ == end_) return Fail("unterminated array");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return Status();
      }
      return Fail("expected ',' or ']'");
    }
  }

  static void AppendUtf8(uint32_t cp, std::string* s)
  {
    if (cp < 0x80) {
      s->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  Status ParseHex4(uint32_t* cp)
  {
    if (end_ - p_ < 4) return Fail("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = *p_++;
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Fail("bad \\u escape");
      }
    }
    *cp = v;
    return Status();
  }

  Status ParseString(std::string* out)
  {
    ++p_;  // opening quote
    while (true) {
      if (p_ == end_) return Fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(*p_++);
      if (c == '"') return Status();
      if (c < 0x20) return Fail("control character in string");
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (p_ == end_) return Fail("unterminated escape");
      char e = *p_++;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          TRITONPY_RETURN_IF_ERROR(ParseHex4(&cp));
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            // A high surrogate must be followed by a low one.
            uint32_t lo = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
              return Fail("lone surrogate");
            }
            p_ += 2;
            TRITONPY_RETURN_IF_ERROR(ParseHex4(&lo));
            if (lo < 0xDC00 || lo > 0xDFFF) return Fail("bad surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Fail("lone surrogate");
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Fail("bad escape");
      }
    }
  }

  Status ParseNumber(Value* out)
  {
    const char* start = p_;
    bool is_int = true;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ == end_ || !(*p_ >= '0' && *p_ <= '9')) return Fail("bad value");
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
      is_int = false;
      ++p_;
      if (p_ == end_ || !(*p_ >= '0' && *p_ <= '9')) return Fail("bad number");
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      is_int = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !(*p_ >= '0' && *p_ <= '9')) return Fail("bad number");
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    std::string text(start, p_);
    if (is_int) {
      errno = 0;
      long long v = strtoll(text.c_str(), nullptr, 10);
      if (errno == 0) {
        *out = Value::Int(v);
        return Status();
      }
      if (text[0] != '-') {
        errno = 0;
        unsigned long long u = strtoull(text.c_str(), nullptr, 10);
        if (errno == 0) {
          *out = Value::Uint(u);
          return Status();
        }
      }
      // Out of int64 range: keep it as a double.
    }
    *out = Value::Double(strtod(text.c_str(), nullptr));
    return Status();
  }

  const char* p_;
  const char* end_;
};

}  // namespace

Status
Parse(const char* data, size_t size, Value* out)
{
  Parser parser(data, size);
  Value v;
  TRITONPY_RETURN_IF_ERROR(parser.ParseDocument(&v));
  *out = std::move(v);
  return Status();
}

}  // namespace json
}  // namespace tritonpy
