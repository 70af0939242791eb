// SPDX-License-Identifier: Apache-2.0
#pragma once
// Percentiles by linear interpolation between order statistics (Hyndman-Fan
// type 7, numpy's default): h = (n-1)*q, x[floor h] + frac(h)*(x[floor h + 1] - x[floor h]).
#include <span>
#include <vector>

namespace pav::stats {

// sorted: ascending, non-empty; q in [0, 1].
double percentile_sorted(std::span<const double> sorted, double q);

// Same value as percentile_sorted on the sorted copy, but reorders values in
// place with selection instead of a full sort (used per bootstrap resample).
// NaN when values is empty.
double percentile_select(std::span<double> values, double q);

// Copies and sorts; NaN when values is empty.
double percentile(std::vector<double> values, double q);

}  // namespace pav::stats
