// SPDX-License-Identifier: Apache-2.0
#pragma once
// The drift plot: gnuplot data, script and PNG of a drift report.
#include <string>

#include "properties/drift/run.hpp"

namespace pav::props {

// The plot of ||delta||/||ref|| against the ceiling, one line per cell and
// partial dtype (kernel reference, end to end, and the control when it ran):
// writes <stem>.dat and <stem>.gp next to png_path and runs gnuplot on it.
struct PlotOutcome {
  bool ok = false;
  std::string script, data;  // paths written
  std::string message;       // why it failed (gnuplot missing, no png terminal, gnuplot error)
};
PlotOutcome write_plot(const DriftReport& r, const std::string& png_path);
// "pngcairo" or "png" when gnuplot has it, "" when gnuplot is missing or has neither.
std::string gnuplot_png_terminal();

}  // namespace pav::props
