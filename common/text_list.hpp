// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one comma-list parser of the command line ("A,B,B,A", "5,0,9000",
// "120k/b8,3").
#include <string>
#include <string_view>
#include <vector>

namespace pav {

// Splits at commas and trims spaces around each item. Empty items are kept (an
// empty text gives one empty item) so the caller can reject them by name.
std::vector<std::string> split_list(std::string_view text);

}  // namespace pav
