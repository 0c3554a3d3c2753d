// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Private to the frame codec (protocol.cc, protocol_metric.cc): the
// little-endian helpers and the bounds-checked Reader / appending Writer
// every body decoder and encoder is written with.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "protocol/protocol.h"
#include "util/error.h"

namespace tritonpy {
namespace proto {
namespace codec {

// Little-endian fixed-width helpers (no struct memcpy: byte order is
// explicit whatever the host).
inline void
PutU32(uint8_t* p, uint32_t v)
{
  constexpr int kBytes = static_cast<int>(kU32Size);
  for (int i = 0; i < kBytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void
PutU64(uint8_t* p, uint64_t v)
{
  constexpr int kBytes = static_cast<int>(kU64Size);
  for (int i = 0; i < kBytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t
GetU32(const uint8_t* p)
{
  uint32_t v = 0;
  for (int i = static_cast<int>(kU32Size) - 1; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}
inline uint64_t
GetU64(const uint8_t* p)
{
  uint64_t v = 0;
  for (int i = static_cast<int>(kU64Size) - 1; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}

using ::tritonpy::Violation;  // error.h

// Bounds-checked cursor over one body. Every getter fails instead of
// reading past `end`.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : base_(p), pos_(0), end_(n) {}

  size_t remaining() const { return end_ - pos_; }

  Status Take(size_t n, const uint8_t** out)
  {
    if (n > remaining()) {
      return Violation(
          "truncated: need " + std::to_string(n) + " bytes at offset " +
          std::to_string(pos_) + " of a " + std::to_string(end_) +
          "-byte body");
    }
    *out = base_ + pos_;
    pos_ += n;
    return Status();
  }
  Status U8(uint8_t* v)
  {
    const uint8_t* p;
    TRITONPY_RETURN_IF_ERROR(Take(kU8Size, &p));
    *v = p[0];
    return Status();
  }
  Status U32(uint32_t* v)
  {
    const uint8_t* p;
    TRITONPY_RETURN_IF_ERROR(Take(kU32Size, &p));
    *v = GetU32(p);
    return Status();
  }
  Status U64(uint64_t* v)
  {
    const uint8_t* p;
    TRITONPY_RETURN_IF_ERROR(Take(kU64Size, &p));
    *v = GetU64(p);
    return Status();
  }
  Status F64(double* v)
  {
    uint64_t u;
    TRITONPY_RETURN_IF_ERROR(U64(&u));
    std::memcpy(v, &u, sizeof(u));
    return Status();
  }
  Status I64(int64_t* v)
  {
    uint64_t u;
    TRITONPY_RETURN_IF_ERROR(U64(&u));
    *v = static_cast<int64_t>(u);
    return Status();
  }
  Status Str(std::string* s)
  {
    uint32_t n;
    TRITONPY_RETURN_IF_ERROR(U32(&n));
    const uint8_t* p;
    TRITONPY_RETURN_IF_ERROR(Take(n, &p));
    s->assign(reinterpret_cast<const char*>(p), n);
    return Status();
  }
  Status Zero32()
  {
    uint32_t v;
    TRITONPY_RETURN_IF_ERROR(U32(&v));
    if (v != 0) return Violation("reserved field is not zero");
    return Status();
  }
  Status Pad8()
  {
    size_t n = (kPadAlign - (pos_ % kPadAlign)) % kPadAlign;
    const uint8_t* p;
    TRITONPY_RETURN_IF_ERROR(Take(n, &p));
    for (size_t i = 0; i < n; ++i) {
      if (p[i] != 0) return Violation("padding is not zero");
    }
    return Status();
  }
  Status Ref(ArenaRef* r)
  {
    TRITONPY_RETURN_IF_ERROR(U32(&r->arena_id));
    TRITONPY_RETURN_IF_ERROR(Zero32());
    return U64(&r->offset);
  }
  // A count of items that each take at least `min_item` bytes: rejected at
  // once when it is past MAX_COUNT or the rest of the body cannot hold
  // them, so a forged count never drives a huge allocation (an in-arena
  // body is bounded by stub-max-body-bytes, an inline one by MAX_FRAME).
  Status Count(size_t min_item, uint32_t* n)
  {
    TRITONPY_RETURN_IF_ERROR(U32(n));
    if (*n > kMaxCount) {
      return Violation(
          "count " + std::to_string(*n) + " is more than MAX_COUNT (" +
          std::to_string(kMaxCount) + ")");
    }
    if (min_item > 0 && *n > remaining() / min_item) {
      return Violation(
          "count " + std::to_string(*n) + " does not fit in the remaining " +
          std::to_string(remaining()) + " bytes");
    }
    return Status();
  }
  Status Done()
  {
    if (pos_ != end_) {
      return Violation(std::to_string(remaining()) + " trailing bytes");
    }
    return Status();
  }

  // `receiver_arena_ok`: location 2 is accepted (RESPONSES outputs only).
  Status Tensor(proto::Tensor* t, bool receiver_arena_ok = false)
  {
    TRITONPY_RETURN_IF_ERROR(Str(&t->name));
    TRITONPY_RETURN_IF_ERROR(U32(&t->dtype));
    if (t->dtype < 1 || t->dtype > 14) {
      return Violation(
          "tensor '" + t->name + "': bad dtype " + std::to_string(t->dtype));
    }
    uint32_t ndim;
    TRITONPY_RETURN_IF_ERROR(U32(&ndim));
    if (ndim > kMaxNdim) {
      return Violation(
          "tensor '" + t->name + "': ndim " + std::to_string(ndim) + " > " +
          std::to_string(kMaxNdim));
    }
    t->dims.resize(ndim);
    for (uint32_t i = 0; i < ndim; ++i) {
      TRITONPY_RETURN_IF_ERROR(I64(&t->dims[i]));
      if (t->dims[i] < 0) {
        return Violation("tensor '" + t->name + "': negative dimension");
      }
    }
    TRITONPY_RETURN_IF_ERROR(U64(&t->byte_size));
    TRITONPY_RETURN_IF_ERROR(U8(&t->location));
    if (t->location == kLocationInline) {
      TRITONPY_RETURN_IF_ERROR(Pad8());
      if (t->byte_size > remaining()) {
        return Violation(
            "tensor '" + t->name + "': inline data past the end of the body");
      }
      TRITONPY_RETURN_IF_ERROR(Take(t->byte_size, &t->data));
      t->ref = ArenaRef();
    } else if (
        t->location == kLocationArena ||
        (receiver_arena_ok && t->location == kLocationReceiverArena)) {
      t->data = nullptr;
      TRITONPY_RETURN_IF_ERROR(Ref(&t->ref));
    } else {
      return Violation(
          "tensor '" + t->name + "': bad location " +
          std::to_string(t->location));
    }
    return Status();
  }

 private:
  const uint8_t* base_;
  size_t pos_;
  size_t end_;
};

// Appending writer. Padding is counted from the start of `out`, which is
// the start of the frame (BeginFrame reserved the header).
class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(v); }
  void U32(uint32_t v)
  {
    size_t at = out_->size();
    out_->resize(at + kU32Size);
    PutU32(out_->data() + at, v);
  }
  void U64(uint64_t v)
  {
    size_t at = out_->size();
    out_->resize(at + kU64Size);
    PutU64(out_->data() + at, v);
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v)
  {
    uint64_t u;
    std::memcpy(&u, &v, sizeof(u));
    U64(u);
  }
  void Bytes(const void* p, size_t n)
  {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }
  void Str(const std::string& s)
  {
    U32(static_cast<uint32_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  // A text of the backend's for the stub (an error message): valid UTF-8,
  // cut with the marker past kMaxBackendText (docs/protocol.md, "Text").
  void Text(const std::string& s)
  {
    if (s.size() <= kMaxBackendText && IsValidUtf8(s)) {
      Str(s);
    } else {
      Str(ClipText(s));
    }
  }
  void Pad8()
  {
    out_->resize(
        out_->size() + (kPadAlign - out_->size() % kPadAlign) % kPadAlign, 0);
  }
  void Ref(const ArenaRef& r)
  {
    U32(r.arena_id);
    U32(0);
    U64(r.offset);
  }
  void Tensor(const proto::Tensor& t)
  {
    Str(t.name);
    U32(t.dtype);
    U32(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) I64(d);
    U64(t.byte_size);
    U8(t.location);
    if (t.location == kLocationInline) {
      Pad8();
      if (t.byte_size > 0) Bytes(t.data, t.byte_size);
    } else {
      Ref(t.ref);
    }
  }

 private:
  std::vector<uint8_t>* out_;
};

}  // namespace codec
}  // namespace proto
}  // namespace tritonpy
