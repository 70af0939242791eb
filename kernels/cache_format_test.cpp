// SPDX-License-Identifier: Apache-2.0
// The names of the cache-format enums (kernels/cache_format.hpp): each value's
// name parses back to that value, from any starting value, and nothing else
// parses.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cache_format.hpp"

using namespace pav::kernels;

namespace {

// Every value of E by its name: parsed back from every other starting value.
template <typename E, typename Parse>
void expect_names_round_trip(std::initializer_list<E> values, Parse parse) {
  for (E want : values)
    for (E start : values) {
      E got = start;
      EXPECT_TRUE(parse(to_string(want), got)) << to_string(want);
      EXPECT_EQ(got, want) << to_string(want) << " parsed from a start of " << to_string(start);
    }
  for (const char* bad : {"", "Per_tensor", "per-token", "nhd ", "csr2", "?"}) {
    E got = *values.begin();
    EXPECT_FALSE(parse(bad, got)) << bad;
    EXPECT_EQ(got, *values.begin()) << "a refused name changed the value: " << bad;
  }
}

}  // namespace

TEST(CacheFormatNames, EveryValueParsesBackFromItsName) {
  expect_names_round_trip({ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_token, ScaleKind::per_head},
                          [](std::string_view s, ScaleKind& k) { return parse_scale_kind(s, k); });
  expect_names_round_trip({CacheLayout::packed, CacheLayout::nhd, CacheLayout::hnd},
                          [](std::string_view s, CacheLayout& l) { return parse_cache_layout(s, l); });
  expect_names_round_trip({PageTable::block_table, PageTable::csr},
                          [](std::string_view s, PageTable& p) { return parse_page_table(s, p); });
}
