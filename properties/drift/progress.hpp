// SPDX-License-Identifier: Apache-2.0
#pragma once
// Progress of a drift run, and its one-line rendering for a terminal.
#include <string>

namespace pav::props {

struct DriftProgress {
  double done = 0, total = 1;   // work units (tokens x runs)
  std::string what;             // "cell 2/6 120k/b8 seed 3/8: planned c64 bf16"
  double elapsed_s = 0;
};

// The text of the progress line, cut to `width` characters:
// "drift [#####.....]  42%  cell 2/6 ...  1m02s, ~1m30s left". ProgressReporter
// (common/progress.hpp) draws it, in place on a terminal.
std::string progress_line(const DriftProgress& p, int width = 100);

}  // namespace pav::props
