// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// FuzzInput: a fuzz input read as a stream of integers and strings, for
// the targets whose input is not a frame (fuzz_execute.cc). Past the end,
// every read gives zeros (an empty string): any input describes something.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tritonpy {
namespace fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t U8() { return static_cast<uint8_t>(Int(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Int(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Int(4)); }
  uint64_t U64() { return Int(8); }
  bool empty() const { return at_ == size_; }
  // Up to `n` bytes (fewer when the input ends).
  std::string Bytes(size_t n)
  {
    n = n < size_ - at_ ? n : size_ - at_;
    if (n == 0) return std::string();
    std::string s(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return s;
  }

 private:
  uint64_t Int(size_t width)
  {
    uint64_t v = 0;
    size_t n = width < size_ - at_ ? width : size_ - at_;
    if (n > 0) std::memcpy(&v, data_ + at_, n);  // little-endian host
    at_ += n;
    return v;
  }

  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace fuzz
}  // namespace tritonpy
