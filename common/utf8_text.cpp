// SPDX-License-Identifier: Apache-2.0
#include "common/utf8_text.hpp"

#include <cstdint>

namespace pav {

namespace {

// Length of the well-formed sequence starting at text[i], or 0 when the bytes
// there are not one (Unicode 15, table 3-7).
std::size_t sequence_length(std::string_view t, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<uint8_t>(t[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  const std::size_t left = t.size() - i;
  auto cont = [&](std::size_t k, uint8_t lo = 0x80, uint8_t hi = 0xbf) {
    return k < left && b(i + k) >= lo && b(i + k) <= hi;
  };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c == 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (c == 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

// Bytes of the maximal bad subpart at text[i] (at least 1): a lead byte and the
// continuation bytes that could still have followed it.
std::size_t bad_length(std::string_view t, std::size_t i) {
  const auto c = static_cast<uint8_t>(t[i]);
  std::size_t want = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 1;
  std::size_t n = 1;
  while (n < want && i + n < t.size()) {
    // Whether the prefix so far could begin a well-formed sequence.
    std::string_view probe = t.substr(i, n + 1);
    const auto d = static_cast<uint8_t>(probe[n]);
    if (d < 0x80 || d > 0xbf) break;
    if (n == 1 && ((c == 0xe0 && d < 0xa0) || (c == 0xed && d > 0x9f) || (c == 0xf0 && d < 0x90) ||
                   (c == 0xf4 && d > 0x8f)))
      break;
    ++n;
  }
  return n;
}

constexpr std::string_view kReplacement = "\xef\xbf\xbd";
constexpr std::string_view kCutMark = "...";

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_clean(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(text.size() < max_bytes ? text.size() : max_bytes);
  // Room for the text when it has to be cut: the mark must fit too.
  const std::size_t room = max_bytes >= kCutMark.size() ? max_bytes - kCutMark.size() : 0;
  std::size_t kept_at_room = 0;  // out's length when it last fit in `room`
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = sequence_length(text, i);
    const std::string_view piece = n ? text.substr(i, n) : kReplacement;
    i += n ? n : bad_length(text, i);
    if (out.size() + piece.size() > max_bytes) {
      out.resize(kept_at_room);
      if (out.size() + kCutMark.size() <= max_bytes) out += kCutMark;
      return out;
    }
    out += piece;
    if (out.size() <= room) kept_at_room = out.size();
  }
  return out;
}

std::size_t utf8_boundary(std::string_view text, std::size_t at) {
  if (at >= text.size()) return text.size();
  while (at > 0 && (static_cast<uint8_t>(text[at]) & 0xc0) == 0x80) --at;
  return at;
}

}  // namespace pav
