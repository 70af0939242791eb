// SPDX-License-Identifier: Apache-2.0
#include "properties/drift/progress.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>

namespace pav::props {

std::string progress_line(const DriftProgress& p, int width) {
  const double frac = std::clamp(p.total > 0 ? p.done / p.total : 0.0, 0.0, 1.0);
  const int bar = 20, filled = int(frac * bar + 0.5);
  auto clock = [](double s) {
    const int64_t t = int64_t(s + 0.5);
    return t >= 60 ? fmt::format("{}m{:02}s", t / 60, t % 60) : fmt::format("{}s", t);
  };
  std::string eta = frac > 0.02 && frac < 1.0 ? ", ~" + clock(p.elapsed_s * (1.0 - frac) / frac) + " left" : "";
  std::string line = fmt::format("drift [{}{}] {:3.0f}%  {}  {}{}", std::string(filled, '#'),
                                 std::string(bar - filled, '.'), 100.0 * frac, p.what, clock(p.elapsed_s), eta);
  if (int(line.size()) > width) line.resize(width);
  return line;
}

}  // namespace pav::props
