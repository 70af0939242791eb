// SPDX-License-Identifier: Apache-2.0
// pav drift: does the decode error grow with the split ceiling? Runs a drift
// sweep (docs/drift.md) and reports error figures, realized split counts, a
// paired growth test per cell, and the positive control.
#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "common/durable_file.hpp"
#include "common/text_list.hpp"
#include "kernels/validate.hpp"
#include "properties/drift_run.hpp"
#include "properties/drift_run_plot.hpp"
#include "properties/drift_run_report.hpp"
#include "tools/backend_option.hpp"
#include "tools/kernel_option.hpp"
#include "tools/drift_progress.hpp"
#include "tools/options.hpp"

namespace {

using namespace pav;
using ojson = nlohmann::ordered_json;

// --cells: comma-separated cell names ("120k/b8") or indices ("0,3").
std::vector<props::DriftCell> select_cells(const std::vector<props::DriftCell>& all, const std::string& list,
                                           int64_t max_context) {
  std::vector<props::DriftCell> out;
  std::set<int> wanted;
  if (!list.empty()) {
    for (const std::string& item : split_list(list)) {
      if (item.empty()) throw cli::BadInput("--cells: an empty item in '" + list.substr(0, 60) + "'");
      int found = -1;
      for (const auto& c : all)
        if (c.name == item || std::to_string(c.index) == item) found = c.index;
      if (found < 0) {
        std::string names;
        for (const auto& c : all) names += (names.empty() ? "" : ", ") + fmt::format("{} ({})", c.name, c.index);
        throw cli::BadInput(fmt::format("--cells: no cell '{}' in this sweep (cells: {})", item.substr(0, 60), names));
      }
      wanted.insert(found);
    }
  }
  for (const auto& c : all)
    if ((wanted.empty() || wanted.count(c.index)) && (max_context <= 0 || c.context <= max_context)) out.push_back(c);
  if (out.empty()) throw cli::BadInput("--cells / --max-context: no cell of the sweep is left to run");
  return out;
}

int run(std::vector<std::string> args) {
  CLI::App app{"Measure whether the decode error grows with the split ceiling (docs/drift.md).", "drift"};
  std::string sweep_path, backend_name = "auto", md_out, plot_out, cells;
  cli::ReportOutput output;
  int64_t max_context = 0;
  int seeds = 0;
  bool list = false, no_progress = false, quiet = false;
  app.add_option("--sweep", sweep_path, "sweep file (pav-drift-sweep/1); default: the built-in quick sweep, "
                                        "the same as fixtures/drift-quick.json")
      ->check(cli::non_empty());
  cli::add_backend_option(app, backend_name);
  output.add_options(app);  // the full report (pav-drift-report/1)
  app.add_option("--markdown", md_out, "write the report tables as Markdown to FILE")->check(cli::non_empty());
  app.add_option("--plot", plot_out, "write a PNG of error against ceiling (gnuplot; also OUT.gp and OUT.dat)")
      ->check(cli::non_empty());
  auto* opt_cells = app.add_option("--cells", cells, "run only these cells: names (120k/b8) or indices, comma-separated");
  app.add_option("--max-context", max_context, "run only cells whose context is at most N tokens")
      ->check(cli::integer_in(1, cli::kMaxContext))
      ->default_str("all");
  app.add_option("--seeds", seeds, "override the sweep's data seeds per cell")
      ->check(cli::integer_in(2, 10000))
      ->default_str("the sweep's");
  app.add_flag("--list", list, "print the cells, their lengths and the split counts of every arm; run nothing");
  app.add_flag("--no-progress", no_progress, "no progress bar on stderr");
  app.add_flag("--quiet", quiet, "print only the verdict line");
  cli::KernelOptions kernel_options;
  cli::add_kernel_options(app, kernel_options);
  cli::refuse_json_with_value(args);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();
  if (!md_out.empty()) check_writable_file(md_out, "--markdown");
  if (!plot_out.empty()) check_writable_file(plot_out, "--plot");

  props::DriftSweep sweep;
  try {
    sweep = sweep_path.empty() ? props::builtin_quick_sweep() : props::load_drift_sweep(sweep_path);
  } catch (const std::invalid_argument& e) {
    throw cli::BadInput(e.what());
  }
  if (seeds > 0) sweep.seeds = seeds;
  if (opt_cells->count() > 0 && cells.empty()) throw cli::BadInput("--cells: an empty value (give names or indices)");
  // --kernel: the sweep runs that kernel at each ceiling (it must take one).
  std::unique_ptr<adapters::KernelUnderTest> kernel;
  if (!kernel_options.specs.empty()) {
    kernel = cli::open_kernel(kernel_options.specs.front(), kernel_options);
    try {
      sweep = props::kernel_sweep(sweep, kernel->description());
    } catch (const std::invalid_argument& e) {
      throw cli::BadInput("--kernel " + kernel->spec() + ": " + e.what());
    }
  }
  const std::vector<props::DriftCell> chosen = select_cells(props::drift_cells(sweep), cells, max_context);

  if (list) {
    ojson j = cli::report_header("drift");
    j["sweep"] = sweep.name;
    j["cells"] = ojson::array();
    for (const auto& c : chosen)
      j["cells"].push_back({{"index", c.index}, {"name", c.name}, {"hkv", c.heads.hkv}, {"group", c.heads.group},
                            {"requests", c.lens.size()}, {"tokens", c.tokens}, {"lens", c.lens}});
    if (!output.text()) return output.finish(j, cli::kExitOk, "drift");
    const auto arms = props::drift_arms(sweep);
    for (const auto& c : chosen) {
      fmt::print("cell {} {}: Hkv {}, G {}, {} requests, {} tokens\n  lens {}\n", c.index, c.name, c.heads.hkv,
                 c.heads.group, c.lens.size(), c.tokens, fmt::join(c.lens, ","));
      for (const auto& a : arms) {
        if (a.kind == props::ArmKind::uniform) {
          const int splits = kernels::dense_decode_splits(int64_t(c.lens.size()), c.heads.hkv, sweep.cu);
          fmt::print("  {:<20} uniform splits {}\n", a.name, splits);
          continue;
        }
        kernels::WorkPlan plan({int64_t(c.lens.size()), c.heads.hkv, sweep.cu, a.ceiling, sweep.workgroup_budget});
        plan.refresh(c.lens.data());
        std::vector<int64_t> counts;
        for (size_t b = 0; b < c.lens.size(); ++b) counts.push_back(plan.reduce_info()[2 * b + 1]);
        const props::SplitCounts s = props::split_counts(counts);
        fmt::print("  {:<20} capacity {:>5}, splits min/median/max {}/{:g}/{}\n", a.name, plan.capacity(), s.min,
                   s.median, s.max);
      }
    }
    std::fflush(stdout);
    return output.finish(j, cli::kExitOk, "drift");
  }

  const kernels::Backend backend = cli::pick_backend(backend_name);
  // Without gnuplot the plot cannot be made: say so before the run, not after.
  if (!plot_out.empty() && props::gnuplot_png_terminal().empty())
    throw cli::CannotRun("--plot: gnuplot with a png terminal is needed and was not found on PATH");
  props::DriftRunOptions opt;
  opt.backend = backend;
  opt.kernel = kernel.get();
  const bool text = output.text();
  opt.progress = cli::drift_progress(std::make_shared<ProgressReporter>(stderr, !no_progress && !quiet));
  cli::install_stop_handlers();
  if (!quiet && text)
    fmt::print("pav drift: sweep {} ({} cells of {}), {}, {} seeds\n", sweep.name, chosen.size(),
               props::drift_cells(sweep).size(),
               kernel ? "kernel " + adapters::identity(*kernel) : "backend " + std::string(cli::backend_name(backend)),
               sweep.seeds);
  std::fflush(stdout);
  props::DriftReport rep;
  try {
    rep = props::run_drift(sweep, chosen, opt);
  } catch (const kernels::RejectError& e) {
    throw cli::BadInput(std::string("the kernel rejected a call of this sweep: ") + e.what());
  } catch (const std::invalid_argument& e) {
    if (!kernel) throw;
    throw cli::BadInput("--kernel " + kernel->spec() + ": " + e.what());
  } catch (const cli::DriftStopped&) {
    fmt::print(stderr, "pav drift: stopped by {} before the sweep ended; no report written\n",
               cli::stop_signal_name());
    return cli::kExitCannotRun;
  }

  const std::string md = props::report_markdown(rep);
  if (text && !quiet) fmt::print("\n{}", md);
  else if (text) fmt::print("{}\n", rep.verdict);
  int rc = rep.passed ? cli::kExitOk : cli::kExitFail;
  auto written = [&](auto write) {
    try {
      write();
    } catch (const IoError& e) {
      fmt::print(stderr, "pav drift: {}\n", e.what());
      if (rc == cli::kExitOk) rc = cli::kExitCannotRun;
    }
  };
  if (!md_out.empty()) written([&] { write_file_atomically(md_out, md); });
  if (!plot_out.empty()) {
    const props::PlotOutcome po = props::write_plot(rep, plot_out);
    if (po.ok) {
      if (!quiet && text) fmt::print("plot: {} (script {}, data {})\n", plot_out, po.script, po.data);
    } else {
      fmt::print(stderr, "pav drift: --plot: {}\n", po.message);
      if (rc == cli::kExitOk) rc = cli::kExitCannotRun;
    }
  }
  ojson j = cli::report_header("drift");
  // The sweep's name and description came from a file: bytes that are not
  // UTF-8 are replaced, never thrown on.
  const ojson body = ojson::parse(props::report_json(rep).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  for (const auto& [k, v] : body.items()) j[k] = v;
  return output.finish(j, rc, "drift");
}

}  // namespace

PAV_COMMAND("drift", "does the decode error grow with the split ceiling? paired sweep vs two references", run);
