// SPDX-License-Identifier: Apache-2.0
#include "common/text_list.hpp"

namespace pav {

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const size_t first = item.find_first_not_of(' ');
    item = first == std::string_view::npos ? std::string_view() : item.substr(first, item.find_last_not_of(' ') - first + 1);
    out.emplace_back(item);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

}  // namespace pav
