// SPDX-License-Identifier: Apache-2.0
#pragma once

namespace pav::stats {

// A closed interval [lo, hi]; used for confidence intervals.
struct Interval {
  double lo = 0.0;
  double hi = 0.0;
};

}  // namespace pav::stats
