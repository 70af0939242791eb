// SPDX-License-Identifier: Apache-2.0
#pragma once
// Text a kernel under test hands pav (its name and version, its messages and
// reasons, a worker's stderr, an .npy header, a reply line that is not JSON)
// is made valid UTF-8 of bounded length where it enters pav, so every report
// and case file that quotes it can be written: nlohmann's dump() throws on an
// invalid byte, and a report that cannot be written is evidence lost.
#include <cstddef>
#include <string>
#include <string_view>

namespace pav {

// True when text is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing past U+10FFFF, no sequence cut short).
bool is_valid_utf8(std::string_view text);

// text with every byte that does not start or continue a well-formed sequence
// replaced by U+FFFD (one per maximal bad subpart, as Unicode recommends), cut
// at a character boundary so that the result, with the "..." that marks a cut,
// is at most max_bytes long (max_bytes below 3 leaves room for the mark only
// when it fits). Never splits a multibyte character.
std::string utf8_clean(std::string_view text, std::size_t max_bytes = std::string::npos);

// The largest i <= at (and <= text.size()) where a character of valid UTF-8
// text starts: where text may be cut without splitting a character.
std::size_t utf8_boundary(std::string_view text, std::size_t at);

}  // namespace pav
