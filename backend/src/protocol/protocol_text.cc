// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The text rules of docs/protocol.md ("Text"): every `str` is UTF-8, and a
// text longer than its frame can hold is cut with a visible marker.

#include <string>
#include <string_view>

#include "protocol/protocol.h"

namespace tritonpy {
namespace proto {

namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence at s[i], or of its longest
// well-formed beginning, negated (at least 1: the byte itself). Follows
// Unicode's table of well-formed byte sequences (3.9, table 3-7).
int
Sequence(std::string_view s, size_t i)
{
  const unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return 1;
  int need;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return -k;
    const unsigned char c = static_cast<unsigned char>(s[i + k]);
    if (c < lo || c > hi) return -k;
    lo = 0x80;
    hi = 0xBF;
  }
  return need + 1;
}

}  // namespace

bool
IsValidUtf8(std::string_view s)
{
  for (size_t i = 0; i < s.size();) {
    // ASCII runs are the common case.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const int n = Sequence(s, i);
    if (n < 0) return false;
    i += n;
  }
  return true;
}

std::string
ValidUtf8(std::string_view s)
{
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    const int n = Sequence(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      // The longest broken beginning counts as one character, as
      // Python's errors="replace" counts it.
      out.append(kReplacement);
      i += -n;
    }
  }
  return out;
}

std::string
ClipText(std::string_view text, size_t limit)
{
  std::string valid = ValidUtf8(text);
  if (valid.size() <= limit) return valid;
  const std::string marker = std::string(kTruncatedMarkerStart) +
                             std::to_string(text.size()) + kTruncatedMarkerEnd;
  // The marker counts: a cut text is cut no further by a second ClipText.
  size_t keep = limit > marker.size() ? limit - marker.size() : 0;
  // Back to the first byte of a character.
  while (keep > 0 && (static_cast<unsigned char>(valid[keep]) & 0xC0) == 0x80) {
    --keep;
  }
  valid.resize(keep);
  return valid + marker;
}

}  // namespace proto
}  // namespace tritonpy
