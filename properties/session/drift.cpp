// SPDX-License-Identifier: Apache-2.0
// session::drift: does the decode error grow with the split ceiling? Runs a
// drift sweep (docs/drift.md) and reports error figures, realized split
// counts, a paired growth test per cell, and the positive control.
#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "common/durable_file.hpp"
#include "common/text_list.hpp"
#include "kernels/validate.hpp"
#include "properties/drift/plot.hpp"
#include "properties/drift/report.hpp"
#include "properties/drift/run.hpp"
#include "properties/session/drift_progress.hpp"
#include "properties/session/support.hpp"

namespace pav::session {

namespace {

using ojson = nlohmann::ordered_json;

// --cells: comma-separated cell names ("120k/b8") or indices ("0,3").
std::vector<props::DriftCell> select_cells(const std::vector<props::DriftCell>& all, const std::string& list,
                                           int64_t max_context) {
  std::vector<props::DriftCell> out;
  std::set<int> wanted;
  if (!list.empty()) {
    for (const std::string& item : split_list(list)) {
      if (item.empty()) throw BadInput("--cells: an empty item in '" + list.substr(0, 60) + "'");
      int found = -1;
      for (const auto& c : all)
        if (c.name == item || std::to_string(c.index) == item) found = c.index;
      if (found < 0) {
        std::string names;
        for (const auto& c : all) names += (names.empty() ? "" : ", ") + fmt::format("{} ({})", c.name, c.index);
        throw BadInput(fmt::format("--cells: no cell '{}' in this sweep (cells: {})", item.substr(0, 60), names));
      }
      wanted.insert(found);
    }
  }
  for (const auto& c : all)
    if ((wanted.empty() || wanted.count(c.index)) && (max_context <= 0 || c.context <= max_context)) out.push_back(c);
  if (out.empty()) throw BadInput("--cells / --max-context: no cell of the sweep is left to run");
  return out;
}

}  // namespace

Report drift(const DriftOptions& o, const Io& io) {
  if (!o.markdown_path.empty()) check_writable_file(o.markdown_path, "--markdown");
  if (!o.plot_path.empty()) check_writable_file(o.plot_path, "--plot");

  props::DriftSweep sweep;
  try {
    sweep = o.sweep_path.empty() ? props::builtin_quick_sweep() : props::load_drift_sweep(o.sweep_path);
  } catch (const std::invalid_argument& e) {
    throw BadInput(e.what());
  }
  if (o.seeds > 0) sweep.seeds = o.seeds;
  if (o.cells_given && o.cells.empty()) throw BadInput("--cells: an empty value (give names or indices)");
  // --kernel: the sweep runs that kernel at each ceiling (it must take one).
  std::unique_ptr<adapters::KernelUnderTest> kernel;
  if (o.kernel.specs.size() > 1) throw BadInput("--kernel: the drift sweep runs one kernel");
  if (!o.kernel.specs.empty()) {
    kernel = open_kernel(o.kernel.specs.front(), o.kernel);
    try {
      sweep = props::kernel_sweep(sweep, kernel->description());
    } catch (const std::invalid_argument& e) {
      throw BadInput("--kernel " + kernel->spec() + ": " + e.what());
    }
  }
  const std::vector<props::DriftCell> chosen = select_cells(props::drift_cells(sweep), o.cells, o.max_context);

  if (o.list) {
    ojson j = report_header("drift");
    j["sweep"] = sweep.name;
    j["cells"] = ojson::array();
    for (const auto& c : chosen)
      j["cells"].push_back({{"index", c.index}, {"name", c.name}, {"hkv", c.heads.hkv}, {"group", c.heads.group},
                            {"requests", c.lens.size()}, {"tokens", c.tokens}, {"lens", c.lens}});
    Report listed;
    listed.verdict = "listed";
    listed.json = j;
    if (!io.out) return listed;
    const auto arms = props::drift_arms(sweep);
    for (const auto& c : chosen) {
      fmt::print(io.out, "cell {} {}: Hkv {}, G {}, {} requests, {} tokens\n  lens {}\n", c.index, c.name, c.heads.hkv,
                 c.heads.group, c.lens.size(), c.tokens, fmt::join(c.lens, ","));
      for (const auto& a : arms) {
        if (a.kind == props::ArmKind::uniform) {
          const int splits = kernels::dense_decode_splits(int64_t(c.lens.size()), c.heads.hkv, sweep.cu);
          fmt::print(io.out, "  {:<20} uniform splits {}\n", a.name, splits);
          continue;
        }
        kernels::WorkPlan plan({int64_t(c.lens.size()), c.heads.hkv, sweep.cu, a.ceiling, sweep.workgroup_budget});
        plan.refresh(c.lens.data());
        std::vector<int64_t> counts;
        for (size_t b = 0; b < c.lens.size(); ++b) counts.push_back(plan.reduce_info()[2 * b + 1]);
        const props::SplitCounts s = props::split_counts(counts);
        fmt::print(io.out, "  {:<20} capacity {:>5}, splits min/median/max {}/{:g}/{}\n", a.name, plan.capacity(), s.min,
                   s.median, s.max);
      }
    }
    std::fflush(io.out);
    return listed;
  }

  const kernels::Backend backend = pick_backend(o.backend);
  // Without gnuplot the plot cannot be made: say so before the run, not after.
  if (!o.plot_path.empty() && props::gnuplot_png_terminal().empty())
    throw CannotRun("--plot: gnuplot with a png terminal is needed and was not found on PATH");
  props::DriftRunOptions opt;
  opt.backend = backend;
  opt.kernel = kernel.get();
  const bool text = io.out != nullptr, quiet = o.quiet;
  opt.progress = drift_progress(std::make_shared<ProgressReporter>(io.progress, io.show_progress && !quiet),
                                stop_test(io));
  if (!quiet && text)
    fmt::print(io.out, "pav drift: sweep {} ({} cells of {}), {}, {} seeds\n", sweep.name, chosen.size(),
               props::drift_cells(sweep).size(),
               kernel ? "kernel " + adapters::identity(*kernel) : "backend " + std::string(backend_name(backend)),
               sweep.seeds);
  if (text) std::fflush(io.out);
  props::DriftReport rep;
  try {
    rep = props::run_drift(sweep, chosen, opt);
  } catch (const kernels::RejectError& e) {
    throw BadInput(std::string("the kernel rejected a call of this sweep: ") + e.what());
  } catch (const std::invalid_argument& e) {
    if (!kernel) throw;
    throw BadInput("--kernel " + kernel->spec() + ": " + e.what());
  } catch (const DriftStopped&) {
    if (io.err) fmt::print(io.err, "pav drift: stopped by {} before the sweep ended; no report written\n", stop_name(io));
    Report stopped;  // no report: the JSON document stays null
    stopped.exit_code = kExitCannotRun;
    stopped.interrupted = true;
    stopped.verdict = "STOPPED (not a pass)";
    return stopped;
  }

  const std::string md = props::report_markdown(rep);
  if (text && !quiet) fmt::print(io.out, "\n{}", md);
  else if (text) fmt::print(io.out, "{}\n", rep.verdict);
  int rc = rep.passed ? kExitOk : kExitFail;
  auto written = [&](auto write) {
    try {
      write();
    } catch (const IoError& e) {
      if (io.err) fmt::print(io.err, "pav drift: {}\n", e.what());
      if (rc == kExitOk) rc = kExitCannotRun;
    }
  };
  if (!o.markdown_path.empty()) written([&] { write_file_atomically(o.markdown_path, md); });
  if (!o.plot_path.empty()) {
    const props::PlotOutcome po = props::write_plot(rep, o.plot_path);
    if (po.ok) {
      if (!quiet && text) fmt::print(io.out, "plot: {} (script {}, data {})\n", o.plot_path, po.script, po.data);
    } else {
      if (io.err) fmt::print(io.err, "pav drift: --plot: {}\n", po.message);
      if (rc == kExitOk) rc = kExitCannotRun;
    }
  }
  ojson j = report_header("drift");
  // The sweep's name and description came from a file: bytes that are not
  // UTF-8 are replaced, never thrown on.
  const ojson body = ojson::parse(props::report_json(rep).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  for (const auto& [k, v] : body.items()) j[k] = v;
  Report out;
  out.exit_code = rc;
  out.verdict = rep.verdict;
  out.json = std::move(j);
  return out;
}

}  // namespace pav::session
