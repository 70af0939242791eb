// SPDX-License-Identifier: Apache-2.0
#include "properties/drift/plot.hpp"

#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "properties/drift/report.hpp"

namespace pav::props {

using kernels::DType;

namespace {

std::string escape_gp(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

}  // namespace

std::string gnuplot_png_terminal() {
  FILE* p = popen("gnuplot -e 'set terminal' 2>&1", "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) return "";
  auto has = [&](const std::string& t) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream w(line);
      std::string first;
      if (w >> first && first == t) return true;
    }
    return false;
  };
  if (has("pngcairo")) return "pngcairo";
  if (has("png")) return "png";
  return "";
}

PlotOutcome write_plot(const DriftReport& r, const std::string& png_path) {
  PlotOutcome po;
  namespace fs = std::filesystem;
  const fs::path png(png_path);
  fs::path stem = png;
  stem.replace_extension();
  po.data = stem.string() + ".dat";
  po.script = stem.string() + ".gp";
  const DriftSweep& s = r.sweep;

  // Data: one gnuplot block (index) per (cell, series), separated by two blank
  // lines; columns: ceiling, mean, min, max of ||delta||/||ref|| in percent.
  struct Series {
    std::string title;
    int panel;  // 0 kernel, 1 end to end, 2 control
  };
  std::vector<Series> series;
  std::ofstream dat(po.data);
  if (!dat) {
    po.message = "cannot write " + po.data;
    return po;
  }
  dat << "# pav drift plot data: ceiling, mean, min, max of ||delta||/||ref|| (%) over seeds\n";
  auto block = [&](const CellResult& c, ArmKind kind, DType p, bool e2e, int panel, const std::string& title) {
    dat << "# " << title << "\n";
    for (const auto& a : c.arms) {
      if (a.arm.kind != kind || a.arm.partial != p) continue;
      const auto& f = e2e ? a.end_to_end : a.kernel_ref;
      dat << fmt::format("{} {:.6g} {:.6g} {:.6g}\n", a.arm.ceiling, 100 * mean_of(f, &ErrorFigures::rel_l2),
                         100 * min_of(f, &ErrorFigures::rel_l2), 100 * max_of(f, &ErrorFigures::rel_l2));
    }
    dat << "\n\n";
    series.push_back({title, panel});
  };
  for (const auto& c : r.cells)
    for (DType p : s.partials)
      block(c, ArmKind::planned, p, false, 0, fmt::format("{} {}", c.cell.name, kernels::to_string(p)));
  for (const auto& c : r.cells)
    for (DType p : s.partials)
      block(c, ArmKind::planned, p, true, 1, fmt::format("{} {}", c.cell.name, kernels::to_string(p)));
  const bool control = s.control_epsilon > 0;
  if (control)
    for (const auto& c : r.cells) block(c, ArmKind::control, DType::bf16, false, 2, c.cell.name + " control");
  dat.close();

  const std::string term = gnuplot_png_terminal();
  if (term.empty()) {
    po.message = "gnuplot not found (or it has no png/pngcairo terminal): install gnuplot-nox (ci/install-deps.sh); "
                 "data and script written, plot skipped";
    // Still write the script so the plot can be made elsewhere.
  }
  const int panels = control ? 3 : 2;
  std::ofstream gp(po.script);
  if (!gp) {
    po.message = "cannot write " + po.script;
    return po;
  }
  gp << "# pav drift: ||delta||/||ref|| against the split ceiling, per cell (gnuplot " << po.script << ")\n";
  gp << fmt::format("set terminal {} noenhanced size {},{} font \",10\"\n", term.empty() ? "pngcairo" : term, 560 * panels, 480);
  gp << fmt::format("set output \"{}\"\n", escape_gp(png.string()));
  gp << "set logscale x 2\nset grid\nset key below center horizontal maxrows 5 font \",8\" spacing 0.9\n";
  gp << fmt::format("set xrange [{}:{}]\n", s.ceilings.front() / 1.5, s.ceilings.back() * 1.5);
  // The x axis is named in the title: an xlabel collides with the key below the panels.
  gp << "set ylabel \"||delta|| / ||ref|| (%)\"\n";
  gp << fmt::format("set multiplot layout 1,{} title \"pav drift: {} ({}, {} seeds): ||delta||/||ref|| against the "
                    "split ceiling (max_partitions); mean over seeds, bars min-max\"\n",
                    panels, escape_gp(s.name), r.backend, s.seeds);
  const char* titles[] = {"kernel reference (dequantized cache)", "end to end (unquantized source)",
                          "positive control (epsilon on each partition's l)"};
  for (int panel = 0; panel < panels; ++panel) {
    gp << fmt::format("set title \"{}\"\n", titles[panel]);
    std::vector<std::string> parts;
    for (size_t i = 0; i < series.size(); ++i)
      if (series[i].panel == panel)
        parts.push_back(fmt::format("\"{}\" index {} using 1:2:3:4 with yerrorlines title \"{}\"", escape_gp(po.data),
                                    i, escape_gp(series[i].title)));
    gp << "plot ";
    for (size_t i = 0; i < parts.size(); ++i) gp << (i ? ", \\\n     " : "") << parts[i];
    gp << "\n";
  }
  gp << "unset multiplot\n";
  gp.close();
  if (term.empty()) return po;
  const std::string cmd = fmt::format("gnuplot \"{}\" 2>&1", escape_gp(po.script));
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (p) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = pclose(p);
    if (rc != 0) {
      po.message = "gnuplot failed: " + out;
      return po;
    }
  }
  if (!fs::exists(png) || fs::file_size(png) == 0) {
    po.message = "gnuplot wrote no " + png.string() + ": " + out;
    return po;
  }
  po.ok = true;
  return po;
}

}  // namespace pav::props
