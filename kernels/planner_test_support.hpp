// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared by the planner suites (planner_test.cpp, planner_balanced_test.cpp):
// row access, tile counts computed without the planner's helpers, and the
// layout every plan must have whatever its policy.
#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/planner.hpp"

namespace pav::kernels::plan_check {

inline std::vector<int32_t> row(const WorkPlan& p, int64_t i) {
  return {p.work_info()[4 * i], p.work_info()[4 * i + 1], p.work_info()[4 * i + 2], p.work_info()[4 * i + 3]};
}

inline int64_t tiles_of(int32_t len) { return len <= 0 ? 0 : (int64_t(len) + 255) / 256; }

// RapidCheck assertions: reduce_info runs consecutively from slot 0; each
// request's tasks cover its tiles once, in order, no gap, no overlap, and
// record its raw length; at most min(tiles, maxp) tasks, each of at least
// min_chunk tiles when the request is split (min_chunk 0: not checked);
// slots past the tasks are zero; check_plan_structure() agrees.
inline void assert_plan_layout(const WorkPlan& p, const std::vector<int32_t>& lens, int64_t maxp,
                               int64_t min_chunk = 0) {
  int64_t next_first = 0;
  for (int64_t b = 0; b < int64_t(lens.size()); ++b) {
    const int64_t first = p.reduce_info()[2 * b], count = p.reduce_info()[2 * b + 1];
    const int64_t tiles = tiles_of(lens[b]);
    RC_ASSERT(first == next_first);
    if (tiles == 0) {
      RC_ASSERT(count == 0);
    } else {
      RC_ASSERT(count >= 1);
      RC_ASSERT(count <= std::min(tiles, maxp));
    }
    int64_t covered = 0;
    for (int64_t k = 0; k < count; ++k) {
      const auto r = row(p, first + k);
      RC_ASSERT(r[0] == b);
      RC_ASSERT(r[1] == covered);  // in order, no gap, no overlap
      RC_ASSERT(r[2] > r[1]);
      RC_ASSERT(r[3] == lens[b]);  // the raw length is recorded
      if (count > 1 && min_chunk > 0) RC_ASSERT(r[2] - r[1] >= min_chunk);
      covered = r[2];
    }
    RC_ASSERT(covered == (count ? tiles : 0));
    next_first += count;
  }
  RC_ASSERT(next_first <= p.capacity());
  for (int64_t i = next_first; i < p.capacity(); ++i) RC_ASSERT(row(p, i) == (std::vector<int32_t>{0, 0, 0, 0}));
  RC_ASSERT(check_plan_structure(const_cast<WorkPlan&>(p).view()).empty());
}

}  // namespace pav::kernels::plan_check
